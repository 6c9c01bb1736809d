"""Resource limits that hold for a whole sandbox, not per process: Linux control groups.

An address-space rlimit caps each process alone (six children under the cap hold six times
it) and counts no System V shared memory, tmpfs or ``memfd`` pages; a cgroup's memory
controller counts all of them, for every process the sandbox starts. So every grading
kernel (and every command :func:`sandbox.run` runs) gets a cgroup of its own:

* ``memory``: the whole sandbox's memory (page cache, shmem, tmpfs and memfd pages included);
  past it the kernel's OOM killer acts *inside the group*, never on the grader;
* ``pids``: how many processes and threads it may have at once (a fork bomb meets a wall);
* ``cpu``: an equal weight for each grading worker's group, so that a neighbour spinning on
  every core leaves each sandbox its share (fairtime.py: the clock that extends its limits).

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

This module says which of them works here (:func:`detect`, :func:`require`); groups.py makes
one sandbox's group, enforces its caps there, and removes it.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("memory", "pids", "cpu")
ENV_SUBTREE = "COURSE_GRADE_CGROUP"
ENV_UNSAFE = "COURSE_GRADE_UNSAFE_NO_LIMITS"  # "1": as --unsafe-no-limits where none can be set
NO_LIMITS_HINT = (
    "run `course grade` as root on a machine with cgroups (v1 memory/pids/cpu hierarchies, "
    f"or cgroup v2), set {ENV_SUBTREE} to a delegated cgroup v2 folder, or make "
    "`systemd-run --user --scope` work (a systemd user session)")
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
        write_setting(root / "cgroup.subtree_control", f"+{controller}", quiet=True)
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


def systemd_scope() -> list[str]:
    """systemd-run's start of a transient scope: the system manager's as root, else the
    user's."""
    return ["systemd-run", "--scope", "--quiet", "--collect"] if os.geteuid() == 0 \
        else ["systemd-run", "--user", "--scope", "--quiet", "--collect"]


def _systemd_works() -> str:
    if shutil.which("systemd-run") is None:
        return "systemd-run is not installed"
    done = subprocess.run([*systemd_scope(), "-p", "TasksMax=8", "true"],
                          capture_output=True, text=True, check=False, timeout=30)
    return "" if done.returncode == 0 else \
        f"`{' '.join(systemd_scope()[:3])}` failed ({done.stderr.strip()[-200:]})"


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


def write_setting(path: Path, text: str, *, quiet: bool = False) -> None:
    """Write one cgroup setting; ``quiet``: a file the kernel may lack (swap, say) is skipped."""
    try:
        path.write_text(text)
    except OSError:
        if not quiet:
            raise
