"""Fair time: how much wall time a sandbox lost to others, so that its limits can grow by it.

A neighbour spinning on every core, or a machine loaded by work outside the grader, must not
turn an honest submission into a timeout. The grader reads, for every thread in the
sandbox's control group, how long it was ready to run but waiting for a core
(``/proc/<tid>/schedstat``), and counts it only as far as the sandbox got less than its share
of CPU (session.py extends the cell's limit by it, up to MAX_WAIT_SHARE).
"""
from __future__ import annotations

import contextlib
from pathlib import Path


def cpu_times(threads: list[int]) -> dict[int, tuple[int, int]]:
    """Per thread: (ns spent on a CPU, ns spent ready to run but waiting for one), from
    ``/proc/<tid>/schedstat``."""
    times = {}
    for tid in threads:
        with contextlib.suppress(OSError, ValueError, IndexError):
            ran, waited = Path(f"/proc/{tid}/schedstat").read_text().split()[:2]
            times[tid] = (int(ran), int(waited))
    return times


def starved_seconds(before: dict[int, tuple[int, int]], now: dict[int, tuple[int, int]],
                    elapsed: float, share_cores: float) -> float:
    """How much wall time a sandbox lost to others since ``before``: the longest any of its
    threads waited for a core, but only as far as it got less than ``share_cores`` cores
    of CPU in ``elapsed`` seconds (waiting on its own other threads is not lost time:
    that is the sandbox's own use of its share)."""
    waited = max((wait - before.get(tid, (0, 0))[1] for tid, (_, wait) in now.items()),
                 default=0) / 1e9
    ran = sum(run - before.get(tid, (0, 0))[0] for tid, (run, _) in now.items()) / 1e9
    deficit = elapsed - ran / share_cores
    return max(0.0, min(waited, deficit))
