"""One sandbox's control group: made with its caps, watched, emptied and removed.

Which kind of control groups this machine offers, and where, is cgroups.py's business; this
module makes one group of that kind (for a grading kernel, a command :func:`sandbox.run`
runs, a worker or the whole run) and enforces the per-sandbox caps of ``Limits``
(``LimitSpec.per_sandbox``) in it: memory and processes, through the cgroup's files (v1, v2)
or a systemd scope's properties. A process joins its group by writing its own PID to
``cgroup.procs`` before it starts bwrap (the launcher's ``--join``, :func:`launch_argv`), so
nothing it starts can be outside.
"""
from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .cgroups import Backend, ResourceControl, systemd_scope, write_setting
from .launcher import limited_argv
from .records import Limits

SCOPE_CPU_WEIGHT = 100  # systemd's CPUWeight of each sandbox's scope: an equal share


@dataclass(frozen=True)
class Group:
    """A cgroup (v1: the same path in each hierarchy) or a systemd scope's settings."""

    control: ResourceControl
    name: str  # relative to the control's root, e.g. "course-grade-12/w34/k5"

    @property
    def folders(self) -> list[Path]:
        return [Path(root) / self.name for root in self.control.roots]

    def create(self, limits: Limits | None, cpu_tasks: int = 1, *,
               parents: bool = True) -> Group:
        """Make the group (and its parents); ``limits`` None: a parent holding a CPU share
        worth ``cpu_tasks`` busy processes outside it (the kernel weighs a group as one
        process: a whole grading run must not count as one among the machine's others).
        ``parents=False``: only inside a parent that exists, else FileNotFoundError (a
        grading kernel's group never makes its run's group again once the run removed it)."""
        for folder in self.folders:
            folder.mkdir(parents=parents, exist_ok=True)
        if self.control.backend is Backend.V2:
            root = Path(self.control.roots[0])
            for parent in [root, *reversed(self.folders[0].parents)]:
                if parent == root or root in parent.parents:
                    for controller in ("memory", "pids", "cpu"):
                        write_setting(parent / "cgroup.subtree_control", f"+{controller}",
                                      quiet=True)
        self._set(limits, cpu_tasks)
        return self

    def ensure(self) -> Group:
        """This group as a slot for others (no limits of its own), made if it is missing,
        only inside a parent that exists (FileNotFoundError otherwise, as ``create``)."""
        if not self.folders or not self.folders[0].exists():
            self.create(None, parents=False)
        return self

    def _set(self, limits: Limits | None, cpu_tasks: int) -> None:
        backend = self.control.backend
        if backend is Backend.V1:
            memory, pids, cpu = self.folders
            if limits is None:
                write_setting(cpu / "cpu.shares", str(min(1024 * cpu_tasks, 262144)))
                return
            if limits.memory_mb:
                cap = str(limits.memory_mb * 2**20)
                write_setting(memory / "memory.limit_in_bytes", cap)
                write_setting(memory / "memory.memsw.limit_in_bytes", cap, quiet=True)  # no swap
            write_setting(pids / "pids.max", str(limits.max_processes))
        elif backend is Backend.V2:
            folder = self.folders[0]
            if limits is None:
                write_setting(folder / "cpu.weight", str(min(100 * cpu_tasks, 10000)), quiet=True)
                return
            if limits.memory_mb:
                write_setting(folder / "memory.max", str(limits.memory_mb * 2**20))
                write_setting(folder / "memory.swap.max", "0", quiet=True)
            write_setting(folder / "pids.max", str(limits.max_processes))

    def join_files(self) -> list[str]:
        """The ``cgroup.procs`` files a launcher writes its PID to."""
        return [str(folder / "cgroup.procs") for folder in self.folders]

    def pids(self) -> list[int]:
        """Every process in the group and its children (a thread's id is not listed)."""
        found: list[int] = []
        for folder in self.folders[:1]:
            for procs in folder.rglob("cgroup.procs"):
                with contextlib.suppress(OSError, ValueError):
                    found += [int(pid) for pid in procs.read_text().split()]
        return found

    def threads(self) -> list[int]:
        found: list[int] = []
        name = "tasks" if self.control.backend is Backend.V1 else "cgroup.threads"
        for folder in self.folders[:1]:
            for tasks in folder.rglob(name):
                with contextlib.suppress(OSError, ValueError):
                    found += [int(tid) for tid in tasks.read_text().split()]
        return found

    def kill(self, wait_s: float = 5.0) -> bool:
        """SIGKILL everything in the group; True once it is empty."""
        folders = self.folders
        if not folders:
            return True
        kill_file = folders[0] / "cgroup.kill"
        deadline = time.monotonic() + wait_s
        while True:
            alive = self.pids()
            if not alive:
                return True
            if kill_file.exists():
                write_setting(kill_file, "1", quiet=True)
            for pid in alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)

    def remove(self, wait_s: float = 10.0) -> list[Path]:
        """Kill what is left and remove the group and its children; the folders that are
        still there afterwards (none, unless a process outlived ``wait_s`` of SIGKILLs or
        something kept making the group again), deepest first."""
        self.kill()
        # A killed process leaves its group a moment after it dies (the kernel still frees
        # its memory): until then rmdir says EBUSY, so try again for a while.
        deadline = time.monotonic() + wait_s
        while True:
            for folder in self.folders:
                for child in sorted(_subgroups(folder), key=lambda p: -len(p.parts)):
                    with contextlib.suppress(OSError):  # gone already, or busy: see below
                        child.rmdir()
            # What is there now, looked at after the last rmdir: a folder made again meanwhile
            # (a process starting a group inside this one) counts as left, never as removed.
            left = sorted((child for folder in self.folders for child in _subgroups(folder)),
                          key=lambda p: -len(p.parts))
            if not left or time.monotonic() > deadline:
                return left
            self.kill(wait_s=0.5)
            time.sleep(0.1)

    def counters(self) -> GroupCounters:
        """What the limits refused so far: OOM kills and refused forks."""
        backend = self.control.backend
        oom = forks = 0
        if backend is Backend.V1:
            memory, pids, _ = self.folders
            oom = _field(memory / "memory.oom_control", "oom_kill")
            forks = _field(pids / "pids.events", "max")
        elif backend is Backend.V2:
            folder = self.folders[0]
            oom = _field(folder / "memory.events", "oom_kill")
            forks = _field(folder / "pids.events", "max")
        return GroupCounters(oom, forks)


@dataclass(frozen=True)
class GroupCounters:
    oom_kills: int
    refused_forks: int

    def describe(self) -> str:
        parts = []
        if self.oom_kills:
            parts.append(f"the memory limit killed {self.oom_kills} of its processes")
        if self.refused_forks:
            parts.append(f"the process limit refused {self.refused_forks} new processes")
        return "; ".join(parts)


def _subgroups(folder: Path) -> Iterator[Path]:
    """``folder`` and every group below it, parents first; nothing where it is gone (a
    group removed meanwhile is skipped, not an error)."""
    try:
        children = [child for child in folder.iterdir() if child.is_dir()]
    except (FileNotFoundError, NotADirectoryError):
        return
    yield folder
    for child in children:
        yield from _subgroups(child)


def _field(path: Path, name: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    return 0


def systemd_argv(limits: Limits) -> list[str]:
    """The prefix that starts a command in a transient scope with ``limits``' per-sandbox
    caps (the systemd-run backend's form of :meth:`Group.create`)."""
    argv = [*systemd_scope(), "-p", f"TasksMax={limits.max_processes}",
            "-p", f"CPUWeight={SCOPE_CPU_WEIGHT}"]
    if limits.memory_mb:
        argv += ["-p", f"MemoryMax={limits.memory_mb}M", "-p", "MemorySwapMax=0"]
    return [*argv, "--"]


def launch_argv(group: Group | None, limits: Limits, command: Sequence[str]) -> list[str]:
    """``command`` started inside ``group`` (or its systemd scope) by the launcher, under
    ``limits``' rlimits (None: no group, the rlimits alone)."""
    argv = limited_argv(command, limits, join=group.join_files() if group is not None else ())
    if group is not None and group.control.backend is Backend.SYSTEMD:
        return [*systemd_argv(limits), *argv]
    return argv
