"""What a sandboxed process sees: bubblewrap's (``bwrap``'s) command line.

The sandbox's file system is made only of the system folders (not the host's /etc: a
synthesised one, see SYNTHETIC_ETC and HOST_ETC), the Python installation and the
``course_utils`` package, all read-only; a private ``/tmp`` and ``/dev/shm`` (small tmpfs); a
fresh ``/proc`` and a minimal ``/dev`` (plus NVIDIA devices, when present); and exactly one
writable folder of the caller's, its scratch folder. Its own PID, network, IPC and UTS
namespaces; no capabilities. :func:`bwrap_argv` builds that command line; sandbox.py says
whether bwrap works here and runs commands in it.
"""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .limited import UNPRIVILEGED

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


@dataclass(frozen=True)
class Confinement:
    """What a sandboxed command may see and touch, beyond the system and Python."""

    scratch: Path                       # the only writable folder of the caller's: HOME and cwd
    readable: tuple[Path, ...] = ()     # more read-only folders
    hidden: tuple[Path, ...] = ()       # shown empty, even inside a readable folder
    writable: tuple[Path, ...] = ()     # more read-write folders (a kernel's socket folder)
    scratch_mb: int = 0                 # > 0: scratch is a tmpfs of this size, not the folder


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
    if confinement.scratch_mb:  # in memory, all files together capped (scratch.filled)
        argv += ["--perms", "1777", "--size", str(confinement.scratch_mb * 2**20),
                 "--tmpfs", str(confinement.scratch)]
    else:
        argv += ["--bind", str(confinement.scratch), str(confinement.scratch)]
    for folder in confinement.writable:
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
