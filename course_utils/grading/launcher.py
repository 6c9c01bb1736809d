"""The launcher's command line: ``python -I -S limited.py [rlimits] [--user] [--join] -- CMD``.

Every process the grader starts for student code goes through the launcher (limited.py), and
every such command line is built here, with the rlimit options ``Limits.launcher_options()``
gives: the same caps in front of a sandbox (where it joins its control group) and inside it
(where it gives up root), and the same options the grading kernel (kernel.py) parses.
"""
from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from . import limited
from .records import Limits

LAUNCHER = Path(limited.__file__)


def limited_argv(command: Sequence[str], limits: Limits, *, user: int = -1,
                 join: Sequence[str] = (), syscall_filter: bool = False) -> list[str]:
    """``command`` run under ``limits``' rlimits (and no core dumps), after joining the
    control groups whose ``cgroup.procs`` files ``join`` names, as ``user`` when started as
    root (-1: as it is)."""
    argv = [sys.executable, "-I", "-S", str(LAUNCHER), *limits.launcher_options(),
            "--user", str(user)]
    for procs in join:
        argv += ["--join", procs]
    if syscall_filter:
        argv.append("--syscall-filter")
    return [*argv, "--", *command]
