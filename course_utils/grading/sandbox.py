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
* resource limits for the whole sandbox come from its cgroup (cgroups.py), per process from
  the launcher (limited.py), not from bwrap.

Two entry points: :func:`bwrap_argv` builds the command line (the grader's kernels use it),
and :func:`run` runs a command with limits and a timeout (for checks that must run a
learner's script, e.g. ``torchrun`` for a distributed-training lesson).
"""
from __future__ import annotations

import atexit
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
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from . import cgroups
from .launcher import limited_argv
from .limited import UNPRIVILEGED
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

# Read-only system folders (symbolic links among them, as on merged-/usr systems, are
# recreated as links). /etc is not among them: the sandbox gets a synthesised one.
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/sys")
# What a kernel needs of the host's /etc (the dynamic linker's cache, time zone, the
# commands' alternatives, name tables without secrets); nothing else of it is visible.
HOST_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "os-release",
            "debian_version", "alternatives", "mime.types", "protocols", "services",
            "gai.conf", "host.conf", "networks", "locale.alias")
# Written for the sandbox: the users and groups a kernel may be (root for the sandbox's own
# mounts, nobody for student code), its hostname and loopback, name lookups from files.
SYNTHETIC_ETC = {
    "passwd": "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
              "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    "group": "root:x:0:\nnogroup:x:65534:\n",
    "hosts": "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n",
    "hostname": "localhost\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"
                     "networks: files\nprotocols: files\nservices: files\n",
    "resolv.conf": "",
}
# Readable by root (and so by a kernel when grading as root): covered even then. (They are
# not in the synthesised /etc anyway; this covers a configuration that binds the host's.)
SECRET_PATHS = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/sudoers.d", "/etc/ssh",
                "/etc/ssl/private")
TMPFS_MB = 1024  # private /tmp and /dev/shm: in memory, so capped
PRIVATE_TMPFS = (Path("/tmp"), Path("/dev/shm"))


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

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Confinement:
    """What a sandboxed command may see and touch, beyond the system and Python."""

    scratch: Path                       # the only writable folder of the caller's: HOME and cwd
    readable: tuple[Path, ...] = ()     # more read-only folders
    hidden: tuple[Path, ...] = ()       # shown empty, even inside a readable folder
    writable: tuple[Path, ...] = ()     # more read-write folders (a kernel's socket folder)


@dataclass(frozen=True)
class SandboxedRun:
    """What :func:`run` saw: exit status (None when killed at the timeout) and output."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float
    refused: str = ""  # what the sandbox's limits refused (memory, processes), in words


def python_folders() -> tuple[Path, ...]:
    """The folders this Python and the course package are loaded from (read-only inside)."""
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                  Path(sys.executable).resolve().parents[1], Path(__file__).resolve().parents[1]]
    system = [Path(folder) for folder in SYSTEM_FOLDERS]
    folders: list[Path] = []
    for candidate in map(Path, candidates):
        if candidate.exists() and candidate not in folders and not _inside(candidate, system):
            folders.append(candidate)
    return tuple(folders)


def _visible_roots(confinement: Confinement) -> list[Path]:
    return [Path(folder) for folder in SYSTEM_FOLDERS] + list(python_folders()) \
        + [Path(path) for path in confinement.readable]


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def bwrap_argv(command: Sequence[str], confinement: Confinement, *, bwrap: str = "bwrap",
               unset_env: Sequence[str] = ("JPY_PARENT_PID",),
               switch_user: bool = False) -> list[str]:
    """The bwrap command line that runs ``command`` confined.

    Later mounts cover earlier ones, so the order is: the system (read-only), fresh /proc,
    /dev and tmpfs, then Python and the course (read-only: on top of the fresh /tmp, so that
    a course cloned under /tmp stays visible), hidden folders, and the writable folders.
    ``JPY_PARENT_PID`` is unset by default: in its own PID namespace a kernel would see a
    different parent and exit at once; --die-with-parent gives the guarantee it was for.
    ``switch_user``: started as root, ``command`` keeps the capabilities to change its user
    and no other (it gives them up with root: ``limited.py --user``).
    """
    # Hostname "localhost": it resolves (/etc/hosts) to the sandbox's own loopback, which is
    # where torchrun --standalone looks for its rendezvous.
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net",
            "--unshare-ipc", "--unshare-uts", "--hostname", "localhost", "--unshare-cgroup-try",
            "--cap-drop", "ALL"]
    if switch_user and os.geteuid() == 0:
        argv += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    for name in unset_env:
        argv += ["--unsetenv", name]
    argv += _system_argv()
    size = str(TMPFS_MB * 2**20)
    # Writable by anyone, sticky, as on the host: the kernel runs as an unprivileged user.
    argv += ["--perms", "1777", "--size", size, "--tmpfs", "/tmp",
             "--perms", "1777", "--size", size, "--tmpfs", "/dev/shm"]
    readable = [*python_folders(), *map(Path, confinement.readable)]
    # A read-only folder under the private /tmp (a course cloned there) needs its parents made
    # in that writable tmpfs: give them a tmpfs of their own, frozen read-only at the end, so
    # that writing beside the course fails as it does everywhere else.
    frozen = _private_tops(readable)
    for top in frozen:
        argv += ["--tmpfs", str(top)]
    made: set[Path] = set()
    argv += _open_parents(readable, made)
    for folder in readable:
        argv += ["--ro-bind", str(folder), str(folder)]
    roots = _visible_roots(confinement)
    for path in [*map(Path, SECRET_PATHS), *confinement.hidden]:
        if _inside(Path(path), roots):
            argv += _cover(Path(path))
    argv += _open_parents([confinement.scratch, *confinement.writable], made)
    for folder in [confinement.scratch, *confinement.writable]:
        argv += ["--bind", str(folder), str(folder)]
    # The sandbox's root is a tmpfs bwrap made to hold the mount points: freeze it last, or
    # a write to, say, <course>/Makefile would seem to succeed (in memory, but still).
    argv += ["--remount-ro", "/"]
    for top in frozen:
        argv += ["--remount-ro", str(top)]
    argv += ["--chdir", str(confinement.scratch), "--", *command]
    return argv


def _open_parents(folders: Sequence[Path], made: set[Path]) -> list[str]:
    """Make the folders above mount points traversable by anyone (bwrap would make them
    0700, closed to the unprivileged user a kernel becomes): system folders excepted."""
    argv: list[str] = []
    system = [Path(folder) for folder in SYSTEM_FOLDERS]
    for folder in folders:
        for parent in reversed(Path(folder).parents):
            if parent == Path("/") or parent in made or _inside(parent, system):
                continue
            made.add(parent)
            argv += ["--perms", "0755", "--dir", str(parent)]
    return argv


def _system_argv() -> list[str]:
    """The system folders (read-only), the synthesised /etc, a fresh /proc and /dev."""
    argv: list[str] = []
    for folder in SYSTEM_FOLDERS:
        if os.path.islink(folder):
            argv += ["--symlink", os.readlink(folder), folder]
        elif os.path.isdir(folder):
            argv += ["--ro-bind", folder, folder]
    argv += _etc_argv()
    argv += ["--proc", "/proc", "--dev", "/dev"]
    for device in sorted(Path("/dev").glob("nvidia*")):  # CUDA needs its device files
        argv += ["--dev-bind", str(device), str(device)]
    return argv


@functools.cache
def synthetic_etc() -> Path:
    """A folder holding SYNTHETIC_ETC's files (made once per process, removed at its exit)."""
    folder = Path(tempfile.mkdtemp(prefix="course-sandbox-etc-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    folder.chmod(0o755)
    files = dict(SYNTHETIC_ETC)
    uid, gid = os.getuid(), os.getgid()
    if uid not in (0, UNPRIVILEGED):  # grading as a normal user: the kernel runs as that user
        name = _own_name()
        files["passwd"] += f"{name}:x:{uid}:{gid}:{name}:/nonexistent:/usr/sbin/nologin\n"
        files["group"] += f"{name}:x:{gid}:\n"
    for name, text in files.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o644)
    return folder


def _own_name() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return f"user{os.getuid()}"


def _etc_argv() -> list[str]:
    """A read-only /etc made of the synthesised files and HOST_ETC's entries."""
    etc = synthetic_etc()
    argv = ["--perms", "0755", "--dir", "/etc"]
    for name in SYNTHETIC_ETC:
        argv += ["--ro-bind", str(etc / name), f"/etc/{name}"]
    for name in HOST_ETC:
        host = Path("/etc") / name
        if host.is_symlink():
            argv += ["--symlink", os.readlink(host), str(host)]
        elif host.exists():
            argv += ["--ro-bind", str(host), str(host)]
    return argv


def _private_tops(folders: Sequence[Path]) -> list[Path]:
    """The first folders below /tmp or /dev/shm that hold any of ``folders``."""
    tops: list[Path] = []
    for folder in folders:
        for private in PRIVATE_TMPFS:
            if private in folder.parents:
                top = private / folder.relative_to(private).parts[0]
                if top not in tops:
                    tops.append(top)
    return tops


def _cover(path: Path) -> list[str]:
    """Mount options that show ``path`` empty (nothing when it does not exist)."""
    if path.is_dir() and not path.is_symlink():
        return ["--tmpfs", str(path)]
    if path.exists():
        return ["--ro-bind", "/dev/null", str(path)]
    return []


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
    return Isolation(True, f"{version} sandbox: own PID, network and mount namespaces; "
                     "read-only files except a private scratch folder; no capabilities",
                     bwrap=bwrap, version=version)


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
        inside: str = "") -> SandboxedRun:
    """Run ``command`` in a fresh sandbox in ``scratch``, under ``limits`` (a grading kernel's
    by default); kill it and all it started after ``timeout`` s (wall time).

    The sandbox and everything it starts share one cgroup (cgroups.py), which holds
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
    Example (two DDP ranks on the CPU)::

        done = run(["torchrun", "--standalone", "--nproc_per_node=2", "train.py"],
                   scratch=folder, timeout=120, limits=Limits(memory_mb=2048))
        done.returncode, done.stdout, done.timed_out, done.refused
    """
    isolation = require() if confined else None
    control = cgroups.require() if use_limits else cgroups.UNSAFE
    scratch = Path(scratch).resolve()
    user = UNPRIVILEGED if os.geteuid() == 0 and confined else -1
    if user >= 0:
        for path in [scratch, *scratch.rglob("*")]:
            os.chown(path, user, user, follow_symlinks=False)
        scratch.chmod(scratch.stat().st_mode | 0o711)  # bwrap enters it before the switch
    inner = limited_argv(command, limits, user=user)
    argv = inner if isolation is None else bwrap_argv(
        inner, Confinement(scratch, tuple(map(Path, readable)), tuple(map(Path, hidden))),
        bwrap=isolation.bwrap or "bwrap", switch_user=user >= 0)
    group = None
    if control.enforced:
        name = f"course-run-{os.getpid()}-{next(_runs)}"
        group = cgroups.Group(control, f"{inside}/{name}" if inside else name).create(
            limits, parents=not inside)
    argv = cgroups.launch_argv(group, limits, argv)
    started = time.monotonic()
    # Output goes to files the sandbox cannot see (their size is capped by the file-size
    # rlimit), not to pipes that could fill this process's memory.
    try:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            process = subprocess.Popen(argv, cwd=scratch, stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=err, env=dict(env) if env is not None
                                       else default_env(scratch), start_new_session=True)
            try:
                returncode: int | None = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                # bwrap's death takes its whole PID namespace with it; unconfined, its group
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.kill()
                process.wait()
                returncode = None
            texts = []
            for handle in (out, err):
                handle.seek(0)
                texts.append(handle.read(limits.output_bytes).decode("utf-8", errors="replace"))
        refused = group.counters().describe() if group is not None else ""
    finally:
        if group is not None:
            group.remove()  # nothing it started runs on
    return SandboxedRun(returncode, texts[0], texts[1], returncode is None,
                        time.monotonic() - started, refused)
