"""The learner's :func:`launch`, made patient for a verdict."""
from __future__ import annotations

import os
from pathlib import Path

from ...lab.distributed import Launch, launch, remove


def launch_patiently(script: str | Path, nproc: int = 2, *, max_slowdown: float = 5.0,
                     timeout: float = 60.0, stall: float | None = None, **options) -> Launch:
    """:func:`launch` for a verdict: the limits grow with the machine's load, and a run whose
    ranks all reported a clean end but which still failed (it died tearing down) runs again
    once. ``timeout`` and ``stall`` are for an idle machine; they are multiplied by the load
    average per CPU, between 1 and ``max_slowdown``: a busy machine is slow, not broken."""
    busy = os.getloadavg()[0] / (os.cpu_count() or 1) if hasattr(os, "getloadavg") else 1.0
    slowdown = min(max(1.0, busy), max_slowdown)
    for _ in range(2):
        run = launch(script, nproc, timeout=timeout * slowdown,
                     stall=None if stall is None else stall * slowdown, **options)
        if not run.died_after_reporting(nproc):
            break
        remove(run)
    return run
