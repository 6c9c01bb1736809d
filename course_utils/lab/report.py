"""What a printed figure needs beside it, for every lesson that measures (03, 04, 08, ...).

* :func:`describe_machine` -- cores, CPU model, PyTorch version and device, in one line;
* :func:`quiet_profiler_markers` -- drops the two log lines ``torch.profiler`` writes to stderr.
"""
from __future__ import annotations

import os
import platform
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from .backends import backend_for
from .devices import resolve

__all__ = ["describe_machine", "quiet_profiler_markers"]


# ------------------------------------------------------------------ the machine

def _cpu_model() -> str:
    """'AMD EPYC 7B13' from /proc/cpuinfo on Linux; platform's answer elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def describe_machine(device=None) -> str:
    """One line naming what a figure was measured on: cores, CPU, threads, PyTorch, device.

    ``device`` defaults to :func:`~course_utils.lab.devices.get_device`; it is named as its
    backend names it (:func:`~course_utils.lab.backends.backend_for`): a GPU by its model.
    """
    device = resolve(device, "describe_machine")
    name = backend_for(device).display_name(device)
    return (f"{os.cpu_count()} CPU cores ({_cpu_model()}), {torch.get_num_threads()} PyTorch "
            f"threads, PyTorch {torch.__version__}, device {device} ({name})")


# ------------------------------------------------------------------ the profiler's log lines

# Kineto, the profiler's library, writes one line to stderr as a recording starts and one as it
# stops ("USDT:<date> <pid>:<tid> SyncActivityProfilerHandler.cpp:52] profiler_start"), from C++
# and whatever KINETO_LOG_LEVEL says. A notebook shows them in red, as if something failed.
_PROFILER_MARKER = re.compile(r"^USDT:.*\] profiler_(start|stop)\s*$")


@contextmanager
def quiet_profiler_markers() -> Iterator[None]:
    """Run a ``torch.profiler`` block without its two start/stop log lines on stderr.

    Everything else the block writes to the stderr file descriptor (a warning, an error from
    C++) is written again to ``sys.stderr`` when the block ends.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            text = captured.read().decode(errors="replace")
            kept = [line for line in text.splitlines(keepends=True)
                    if not _PROFILER_MARKER.match(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()

