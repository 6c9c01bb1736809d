"""Run untrusted code in a bubblewrap (``bwrap``) sandbox.

What a sandboxed process gets (see docs/grading.md for what that does and does not defend):

* its own PID namespace: it sees and can signal only its own descendants; when the process
  that started the sandbox dies, or kills it, everything inside dies with it;
* no network (its own, empty network namespace), its own IPC and hostname;
* a file system made only of the system folders (not the host's /etc: a synthesised one,
  see SYNTHETIC_ETC and HOST_ETC), the Python installation and the ``course_utils`` package,
  all read-only; a private ``/tmp`` and ``/dev/shm`` (small tmpfs); a fresh ``/proc`` and a
  minimal ``/dev`` (plus NVIDIA devices, when present);
* exactly one writable folder of the caller's: its scratch folder (its HOME and cwd);
* no capabilities, even when the grader runs as root (then the command becomes uid 65534
  with ``limited.py --user``: bwrap keeps only the capability to change user for it);
* resource limits for the whole sandbox come from its cgroup (groups.py), per process from
  the launcher (limited.py), not from bwrap.

confinement.py builds bwrap's command line (the grader's kernels use it); this module says
whether bwrap works here (:func:`detect`, :func:`require`), and :func:`run` runs a command in a
fresh sandbox with a ``Limits`` record and a timeout (for checks that must run a learner's
script, e.g. ``torchrun`` for a distributed-training lesson).
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from . import cgroups
from .confinement import Confinement, bwrap_argv
from .groups import Group, launch_argv
from .launcher import limited_argv
from .limited import SYSCALL_FILTER, UNPRIVILEGED
from .records import Limits

INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: sudo apt-get install bubblewrap; "
                "Fedora: sudo dnf install bubblewrap; Arch: sudo pacman -S bubblewrap)")
USERNS_HINT = ("bwrap needs user namespaces when not run as root: enable them with "
               "`sysctl kernel.unprivileged_userns_clone=1`, and on Ubuntu 23.10 or newer "
               "`sysctl kernel.apparmor_restrict_unprivileged_userns=0`, or grade as root")
NOT_DEFENDED_WITHOUT_SANDBOX = (
    "student code then runs as you: it can read solutions/, the other submissions and the "
    "gradebook, write to the course folder and its installed packages, use the network, and "
    "signal or kill the grader's own processes")


class SandboxUnavailable(RuntimeError):
    """No working sandbox here; the message says why and how to get one."""


@dataclass(frozen=True)
class Isolation:
    """Which isolation is in force: shown by `course doctor` and at the top of `course grade`."""

    sandboxed: bool
    description: str         # one line
    bwrap: str | None = None  # the executable
    version: str = ""
    problem: str = ""        # why there is no sandbox, and how to get one
    syscall_filter: bool = False  # limited.SYSCALL_FILTER holds for everything inside

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SandboxedRun:
    """What :func:`run` saw: exit status (None when killed at the timeout) and output."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float
    refused: str = ""  # what the sandbox's limits refused (memory, processes), in words


@functools.cache
def detect() -> Isolation:
    """Whether bwrap is installed and can build a sandbox here (tried once per process)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Isolation(False, "none: bubblewrap (bwrap) is not installed",
                         problem=f"bwrap was not found on PATH; {INSTALL_HINT}")
    version = subprocess.run([bwrap, "--version"], check=False, capture_output=True,
                             text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="course-sandbox-probe-") as scratch:
        probe = bwrap_argv([sys.executable, "-I", "-S", "-c", "pass"],
                           Confinement(Path(scratch)), bwrap=bwrap)
        done = subprocess.run(probe, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or ["no error message"])[-1]
        return Isolation(False, f"none: {version or 'bwrap'} cannot create a sandbox here",
                         bwrap=bwrap, version=version,
                         problem=f"bwrap failed ({detail}); {USERNS_HINT}")
    filtered = _filter_works(bwrap)
    return Isolation(True, f"{version} sandbox: own PID, network and mount namespaces; "
                     "read-only files except a private scratch folder; no capabilities; "
                     + (f"syscall filter: {SYSCALL_FILTER}" if filtered else
                        "no syscall filter (libseccomp.so.2 is missing)"),
                     bwrap=bwrap, version=version, syscall_filter=filtered)


def _filter_works(bwrap: str) -> bool:
    """Whether the launcher's syscall filter installs inside a sandbox here."""
    with tempfile.TemporaryDirectory(prefix="course-sandbox-probe-") as scratch:
        command = limited_argv([sys.executable, "-I", "-S", "-c", "pass"], Limits(),
                               syscall_filter=True)
        done = subprocess.run(bwrap_argv(command, Confinement(Path(scratch)), bwrap=bwrap),
                              check=False, capture_output=True)
    return done.returncode == 0


def require() -> Isolation:
    """The working sandbox, or SandboxUnavailable saying how to get one."""
    isolation = detect()
    if not isolation.sandboxed:
        raise SandboxUnavailable(
            f"No grading sandbox: {isolation.problem}. To grade without one anyway, pass "
            f"--unsafe-no-sandbox ({NOT_DEFENDED_WITHOUT_SANDBOX}).")
    return isolation


def default_env(scratch: Path) -> dict[str, str]:
    """A small environment for a sandboxed command: PATH and locale kept, HOME in scratch."""
    env = {key: os.environ[key] for key in ("PATH", "LANG", "LC_ALL") if key in os.environ}
    env.update(HOME=str(scratch), TMPDIR="/tmp", PYTHONDONTWRITEBYTECODE="1")
    return env


_runs = itertools.count()
DEFAULT_LIMITS = Limits()  # a grading kernel's, as `course grade` sets them by default


def run(command: Sequence[str], *, scratch: Path, timeout: float, limits: Limits = DEFAULT_LIMITS,
        env: Mapping[str, str] | None = None, readable: Sequence[Path] = (),
        hidden: Sequence[Path] = (), use_limits: bool = True, confined: bool = True,
        inside: str = "", scratch_mb: int = 0, stdin: bytes = b"") -> SandboxedRun:
    """Run ``command`` in a fresh sandbox in ``scratch``, under ``limits`` (a grading kernel's
    by default); kill it and all it started after ``timeout`` s (wall time).

    The sandbox and everything it starts share one cgroup (groups.py), which holds
    ``limits``' per-sandbox caps (memory in all, shared memory and tmpfs included; processes
    at once); each process has its per-process caps (the launcher's rlimits: data memory,
    open files, file size). Grading as root, the command runs as uid 65534 (``scratch`` is
    handed to that user). Only the first ``limits.output_bytes`` of stdout and of stderr are
    kept; the rest is never held in memory. Nothing it started outlives the call. ``env``
    defaults to :func:`default_env`. Raises SandboxUnavailable where bwrap is missing, and
    cgroups.LimitsUnavailable where no cgroup can be made (``use_limits=False`` runs
    without). ``confined=False`` (a grader run with --unsafe-no-sandbox) runs it without the
    sandbox, as the grading user, with the limits alone. ``inside``: a cgroup (relative to
    the roots) that exists, to make the run's group in (a grading worker's: the grading
    run's end removes it even if the worker was killed mid-run); by default, at the roots.
    ``scratch_mb`` > 0 (confined only): ``scratch`` is a fresh tmpfs of that size inside
    (counted in its memory; what the command leaves there goes with the sandbox), not the
    folder. ``stdin``: what the command reads on its standard input.
    Example (two DDP ranks on the CPU)::

        done = run(["torchrun", "--standalone", "--nproc_per_node=2", "train.py"],
                   scratch=folder, timeout=120, limits=Limits(memory_mb=2048))
        done.returncode, done.stdout, done.timed_out, done.refused
    """
    started = time.monotonic()
    # Output goes to files the sandbox cannot see (their size is capped by the file-size
    # rlimit), not to pipes that could fill this process's memory.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.TemporaryFile() as given:
        given.write(stdin)
        given.seek(0)
        with start(command, scratch=scratch, limits=limits, env=env, readable=readable,
                   hidden=hidden, use_limits=use_limits, confined=confined, inside=inside,
                   scratch_mb=scratch_mb, stdin=given, stdout=out, stderr=err) as running:
            try:
                returncode: int | None = running.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                running.kill()
                returncode = None
            refused = running.refused()
        texts = []
        for handle in (out, err):
            handle.seek(0)
            texts.append(handle.read(limits.output_bytes).decode("utf-8", errors="replace"))
    return SandboxedRun(returncode, texts[0], texts[1], returncode is None,
                        time.monotonic() - started, refused)


@dataclass
class Running:
    """A command started by :func:`start`: its process and its cgroup (None: no limits)."""

    process: subprocess.Popen
    group: Group | None

    def kill(self) -> None:
        """Kill it and all it started: bwrap's death takes its PID namespace with it;
        unconfined, its process group."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.kill()
        self.process.wait()

    def refused(self) -> str:
        return self.group.counters().describe() if self.group is not None else ""


@contextlib.contextmanager
def start(command: Sequence[str], *, scratch: Path, limits: Limits = DEFAULT_LIMITS,
          env: Mapping[str, str] | None = None, readable: Sequence[Path] = (),
          hidden: Sequence[Path] = (), use_limits: bool = True, confined: bool = True,
          inside: str = "", scratch_mb: int = 0, stdin=None, stdout=None,
          stderr=None) -> Iterator[Running]:
    """``command`` started in a fresh sandbox as :func:`run` describes, its standard streams
    those given (files, or ``subprocess.PIPE`` for a caller that bounds what it reads);
    killed with all it started, and its cgroup removed, when the block ends."""
    isolation = require() if confined else None
    control = cgroups.require() if use_limits else cgroups.UNSAFE
    scratch = Path(scratch).resolve()
    user = UNPRIVILEGED if os.geteuid() == 0 and confined else -1
    if user >= 0:
        for path in [scratch, *scratch.rglob("*")]:
            os.chown(path, user, user, follow_symlinks=False)
        scratch.chmod(scratch.stat().st_mode | 0o711)  # bwrap enters it before the switch
    inner = limited_argv(command, limits, user=user,
                         syscall_filter=isolation is not None and isolation.syscall_filter)
    argv = inner if isolation is None else bwrap_argv(
        inner, Confinement(scratch, tuple(map(Path, readable)), tuple(map(Path, hidden)),
                           scratch_mb=scratch_mb),
        bwrap=isolation.bwrap or "bwrap", switch_user=user >= 0)
    group = None
    if control.enforced:
        name = f"course-run-{os.getpid()}-{next(_runs)}"
        group = Group(control, f"{inside}/{name}" if inside else name).create(
            limits, parents=not inside)
    try:
        process = subprocess.Popen(launch_argv(group, limits, argv), cwd=scratch, stdin=stdin,
                                   stdout=stdout, stderr=stderr,
                                   env=dict(env) if env is not None else default_env(scratch),
                                   start_new_session=True)
        running = Running(process, group)
        try:
            yield running
        finally:
            if process.poll() is None:
                running.kill()
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
    finally:
        if group is not None:
            group.remove()  # nothing it started runs on
