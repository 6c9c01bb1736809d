"""Resource limits that hold for a whole sandbox, not per process: Linux control groups.

An address-space rlimit caps each process alone (six children under the cap hold six times
it) and counts no System V shared memory, tmpfs or ``memfd`` pages; a cgroup's memory
controller counts all of them, for every process the sandbox starts. So every grading
kernel (and every command :func:`sandbox.run` runs) gets a cgroup of its own:

* ``memory``: the whole sandbox's memory (page cache, shmem, tmpfs and memfd pages included);
  past it the kernel's OOM killer acts *inside the group*, never on the grader;
* ``pids``: how many processes and threads it may have at once (a fork bomb meets a wall);
* ``cpu``: an equal weight for each grading worker's group, so that a neighbour spinning on
  every core leaves each sandbox its share (see :func:`starved_seconds` for the clock).

Open files are capped by ``RLIMIT_NOFILE`` in each process (:mod:`limited`).

Three ways to get cgroups, tried in this order (:func:`detect`):

* **cgroup v1** (the grader runs as root on a machine with v1 hierarchies ``memory``,
  ``pids`` and ``cpu``): groups are made below the grader's own group in each hierarchy;
* **cgroup v2** with a writable subtree: the grader's own group when it may write there
  (root), or ``COURSE_GRADE_CGROUP=/sys/fs/cgroup/<delegated, empty group>`` (a non-root
  instructor: ``systemd-run --user -p Delegate=yes --scope bash`` gives one);
* **systemd-run --scope** (v2 without a writable subtree: ``--user`` when not root): each
  sandbox is started in a transient scope with ``MemoryMax``, ``MemorySwapMax=0``,
  ``TasksMax`` and ``CPUWeight``.

A process joins its group by writing its own PID to ``cgroup.procs`` before it starts bwrap
(``limited.py --join``), so nothing it starts can be outside.
"""
from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

from .launcher import limited_argv
from .records import Limits

CGROUP_FS = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("memory", "pids", "cpu")
ENV_SUBTREE = "COURSE_GRADE_CGROUP"
ENV_UNSAFE = "COURSE_GRADE_UNSAFE_NO_LIMITS"  # "1": as --unsafe-no-limits where none can be set
NO_LIMITS_HINT = (
    "run `course grade` as root on a machine with cgroups (v1 memory/pids/cpu hierarchies, "
    f"or cgroup v2), set {ENV_SUBTREE} to a delegated cgroup v2 folder, or make "
    "`systemd-run --user --scope` work (a systemd user session)")
SCOPE_CPU_WEIGHT = 100  # systemd's CPUWeight of each sandbox's scope: an equal share
NOT_LIMITED = (
    "a submission can then use all the memory and processes of this machine (the OOM killer "
    "may pick the grader or the gradebook server) and its CPU use slows its neighbours")


class Backend(str, Enum):
    V1 = "cgroup-v1"
    V2 = "cgroup-v2"
    SYSTEMD = "systemd-run"
    NONE = "none"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ResourceControl:
    """Which whole-sandbox limits are in force: `course doctor` and `course grade` say it."""

    backend: Backend
    description: str
    roots: tuple[str, ...] = ()  # v2: the subtree; v1: own group in memory, pids, cpu
    problem: str = ""    # why there are none, and how to get them

    @property
    def enforced(self) -> bool:
        return self.backend is not Backend.NONE

    def as_dict(self) -> dict:
        return {**asdict(self), "backend": self.backend.value, "enforced": self.enforced}


UNSAFE = ResourceControl(Backend.NONE, "none (--unsafe-no-limits): " + NOT_LIMITED)


def _own_group(controller: str | None) -> str:
    """This process's group in a v1 hierarchy (``controller``) or in v2 (None)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, names, path = line.split(":", 2)
        if (controller is None and number == "0" and names == "") or \
                (controller is not None and controller in names.split(",")):
            return path
    raise LookupError(controller or "cgroup2")


def _is_v1(hierarchy: Path) -> bool:
    return (hierarchy / "cgroup.procs").exists() and not (hierarchy / "cgroup.controllers").exists()


def _try_make(folder: Path) -> str:
    """'' if a child group can be made and removed under ``folder``, else why not."""
    probe = folder / f"course-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError as error:
        return f"cannot create a cgroup in {folder} ({error.strerror})"
    return ""


def _v1_roots() -> dict[str, Path] | str:
    roots = {}
    for controller in V1_CONTROLLERS:
        hierarchy = CGROUP_FS / controller
        if not _is_v1(hierarchy):
            return f"no cgroup v1 {controller} hierarchy at {hierarchy}"
        roots[controller] = hierarchy / _own_group(controller).lstrip("/")
        problem = _try_make(roots[controller])
        if problem:
            return problem
    return roots


def _v2_root() -> Path | str:
    configured = os.environ.get(ENV_SUBTREE)
    if configured:
        root = Path(configured)
    elif (CGROUP_FS / "cgroup.controllers").exists():
        root = CGROUP_FS / _own_group(None).lstrip("/")
    else:
        return "no cgroup v2 hierarchy at /sys/fs/cgroup"
    available = set((root / "cgroup.controllers").read_text().split()) \
        if (root / "cgroup.controllers").exists() else set()
    missing = {"memory", "pids"} - available
    if missing:
        return f"cgroup v2 group {root} lacks the {', '.join(sorted(missing))} controller"
    for controller in ("memory", "pids", "cpu"):
        _write(root / "cgroup.subtree_control", f"+{controller}", quiet=True)
    probe = root / f"course-probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError as error:
        return f"cannot create a cgroup in {root} ({error.strerror})"
    delegated = (probe / "memory.max").exists() and (probe / "pids.max").exists()
    probe.rmdir()
    if not delegated:
        return (f"cgroup v2 group {root} cannot give its children memory and pids limits "
                f"(it holds processes itself): set {ENV_SUBTREE} to an empty delegated group")
    return root


def _systemd_scope() -> list[str]:
    """systemd-run's start of a transient scope: the system manager's as root, else the
    user's."""
    return ["systemd-run", "--scope", "--quiet", "--collect"] if os.geteuid() == 0 \
        else ["systemd-run", "--user", "--scope", "--quiet", "--collect"]


def _systemd_works() -> str:
    if shutil.which("systemd-run") is None:
        return "systemd-run is not installed"
    done = subprocess.run([*_systemd_scope(), "-p", "TasksMax=8", "true"],
                          capture_output=True, text=True, check=False, timeout=30)
    return "" if done.returncode == 0 else \
        f"`{' '.join(_systemd_scope()[:3])}` failed ({done.stderr.strip()[-200:]})"


@functools.cache
def detect() -> ResourceControl:
    """The best cgroup backend this process can use (tried once per process)."""
    problems = []
    try:
        v1 = _v1_roots()
    except (OSError, LookupError) as error:
        v1 = f"cgroup v1: {error}"
    if isinstance(v1, dict):
        return ResourceControl(Backend.V1, "cgroup v1 (memory, pids, cpu) per sandbox: memory "
                               "with shared memory and tmpfs, processes, CPU share; open files "
                               "per process", roots=tuple(str(v1[c]) for c in V1_CONTROLLERS))
    problems.append(v1)
    try:
        v2 = _v2_root()
    except (OSError, LookupError) as error:
        v2 = f"cgroup v2: {error}"
    if isinstance(v2, Path):
        return ResourceControl(Backend.V2, "cgroup v2 per sandbox: memory with shared memory "
                               "and tmpfs, processes, CPU weight; open files per process",
                               roots=(str(v2),))
    problems.append(v2)
    try:
        systemd = _systemd_works()
    except (OSError, subprocess.TimeoutExpired) as error:
        systemd = str(error)
    if not systemd:
        return ResourceControl(Backend.SYSTEMD, "systemd-run scope per sandbox: "
                               "MemoryMax (shared memory and tmpfs included), TasksMax, "
                               "CPUWeight; open files per process")
    problems.append(systemd)
    return ResourceControl(Backend.NONE, "none: no control groups can be set here",
                           problem="; ".join(problems) + f". To get them: {NO_LIMITS_HINT}")


class LimitsUnavailable(RuntimeError):
    """No whole-sandbox limits can be set here; the message says why and how."""


def require() -> ResourceControl:
    control = detect()
    if not control.enforced:
        raise LimitsUnavailable(
            f"No whole-submission resource limits: {control.problem}. To grade without them "
            f"anyway, pass --unsafe-no-limits ({NOT_LIMITED}).")
    return control


# ---------------------------------------------------------------------- one group
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
                        _write(parent / "cgroup.subtree_control", f"+{controller}", quiet=True)
        self._set(limits, cpu_tasks)
        return self

    def _set(self, limits: Limits | None, cpu_tasks: int) -> None:
        backend = self.control.backend
        if backend is Backend.V1:
            memory, pids, cpu = self.folders
            if limits is None:
                _write(cpu / "cpu.shares", str(min(1024 * cpu_tasks, 262144)))
                return
            if limits.memory_mb:
                cap = str(limits.memory_mb * 2**20)
                _write(memory / "memory.limit_in_bytes", cap)
                _write(memory / "memory.memsw.limit_in_bytes", cap, quiet=True)  # no swap
            _write(pids / "pids.max", str(limits.max_processes))
        elif backend is Backend.V2:
            folder = self.folders[0]
            if limits is None:
                _write(folder / "cpu.weight", str(min(100 * cpu_tasks, 10000)), quiet=True)
                return
            if limits.memory_mb:
                _write(folder / "memory.max", str(limits.memory_mb * 2**20))
                _write(folder / "memory.swap.max", "0", quiet=True)
            _write(folder / "pids.max", str(limits.max_processes))

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
                _write(kill_file, "1", quiet=True)
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


def _write(path: Path, text: str, *, quiet: bool = False) -> None:
    try:
        path.write_text(text)
    except OSError:
        if not quiet:
            raise


def systemd_argv(limits: Limits) -> list[str]:
    """The prefix that starts a command in a transient scope with ``limits``' per-sandbox
    caps (the systemd-run backend's form of :meth:`Group.create`)."""
    argv = [*_systemd_scope(), "-p", f"TasksMax={limits.max_processes}",
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
