"""Run a command under resource limits: ``python -I -S limited.py [options] -- CMD...``.

Standard library only, so it can run with ``-I -S`` (no site-packages, about 10 ms) in front
of any command; the grading kernel's launcher (kernel.py) parses the same options and calls
:func:`apply` itself instead. In order: join the sandbox's control groups (``--join``: the
command and everything it starts are then counted there, see groups.py), set rlimits (they
hold for the process and everything it starts), give up root for an unprivileged user
(``--user``), then exec.

The rlimit options are the per-process caps of ``grading.records.Limits``, each named after
its field (``--memory-mb`` is ``Limits.memory_mb``) with the field's default:
``Limits.launcher_options()`` emits exactly them (tests/test_grading_limits.py holds the two
to each other; this file cannot import the record, since it runs without site-packages).
"""
from __future__ import annotations

import argparse
import ctypes
import errno
import os
import resource
import sys

UNPRIVILEGED = 65534  # "nobody" on every Linux distribution
# Set whatever the options say; the run's summary line names them with the options' caps.
FIXED_CAPS = ("no core dumps",)


def join(procs_files: list[str]) -> None:
    """Move this process into each cgroup whose ``cgroup.procs`` file is given."""
    for path in procs_files:
        with open(path, "w") as handle:
            handle.write(str(os.getpid()))


def add_rlimit_arguments(parser: argparse.ArgumentParser) -> None:
    """One option per per-process cap of ``Limits``, with its name and default."""
    parser.add_argument("--memory-mb", type=int, default=4096,
                        help="data memory (RLIMIT_DATA), MiB; 0 = no cap")
    parser.add_argument("--max-open-files", type=int, default=1024,
                        help="open files (RLIMIT_NOFILE)")
    parser.add_argument("--max-file-mb", type=int, default=64,
                        help="largest file it may write (RLIMIT_FSIZE), MiB")


def apply(options: argparse.Namespace) -> None:
    """Set the rlimits that :func:`add_rlimit_arguments`' options ask for, and no core dumps.

    The memory cap is RLIMIT_DATA: the private writable memory that allocations take (heap,
    anonymous mappings, tensors), not the address space. PyPI's CUDA build of torch maps
    about 3 GiB of CUDA libraries when imported, even without a driver, so an address-space
    cap of a few GiB killed or stalled every kernel that imported it.
    """
    if options.memory_mb > 0:
        _cap(resource.RLIMIT_DATA, options.memory_mb * 2**20)
    else:  # no cap: not even the grading worker's own, which its children inherit
        hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
        resource.setrlimit(resource.RLIMIT_DATA, (hard, hard))
    _cap(resource.RLIMIT_FSIZE, options.max_file_mb * 2**20)
    _cap(resource.RLIMIT_NOFILE, options.max_open_files)
    _cap(resource.RLIMIT_CORE, 0)  # FIXED_CAPS


def _cap(kind: int, limit: int) -> None:
    resource.setrlimit(kind, (limit, limit))


def cap_own_memory(megabytes: int) -> None:
    """Cap the grading worker's data memory (RLIMIT_DATA, soft: the kernels it starts set their
    own, :func:`apply`), so that what a kernel makes it hold (ZeroMQ reads a message's frames ahead
    of the receiver's count) or a bug of its own costs one submission, never the machine.
    An allocation past it raises MemoryError (the notebook is `error`, its credit kept) or,
    in C, ends the worker (pool.py: its submission is `error`, the run goes on)."""
    if megabytes > 0:
        hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
        cap = megabytes * 2**20 if hard == resource.RLIM_INFINITY else min(hard, megabytes * 2**20)
        resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))


def drop_root(uid: int) -> None:
    """Become ``uid`` (group ``uid``, no supplementary groups) when running as root."""
    if uid < 0 or os.geteuid() != 0:
        return
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_rlimit_arguments(parser)
    parser.add_argument("--user", type=int, default=-1,
                        help="as root: run as this uid (and gid); -1 = stay")
    parser.add_argument("--syscall-filter", action="store_true",
                        help="install SYSCALL_FILTER (needs libseccomp), then run the command")


# ---------------------------------------------------------------------- the syscall filter
# What student code never needs and the kernel's attack surface is made of: new user
# namespaces (clone/unshare with CLONE_NEWUSER; clone3, whose flags a filter cannot read,
# answers ENOSYS and the C library falls back to clone), key rings, eBPF, userfaultfd,
# io_uring, kernel modules and kexec, file handles. Everything else is allowed: torchrun,
# DataLoader workers (fork) and Inductor (a C++ compiler) run as before.
CLONE_NEWUSER = 0x10000000
DENIED = ("keyctl", "add_key", "request_key", "bpf", "userfaultfd", "io_uring_setup",
          "io_uring_enter", "io_uring_register", "init_module", "finit_module",
          "delete_module", "kexec_load", "kexec_file_load", "open_by_handle_at")
SYSCALL_FILTER = "no user namespaces, key rings, eBPF, io_uring, userfaultfd or modules"
_ALLOW, _ERRNO, _MASKED_EQ = 0x7FFF0000, 0x00050000, 7


class _ArgCompare(ctypes.Structure):  # libseccomp's struct scmp_arg_cmp
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


def libseccomp() -> ctypes.CDLL | None:
    """The system's libseccomp (Debian and Ubuntu's apt depends on it), or None."""
    try:
        lib = ctypes.CDLL("libseccomp.so.2")
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(_ArgCompare)]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def install_syscall_filter() -> None:
    """Install the filter in this process (and so in all it starts); OSError if it cannot."""
    lib = libseccomp()
    if lib is None:
        raise OSError("libseccomp.so.2 is not installed")
    context = lib.seccomp_init(_ALLOW)
    if not context:
        raise OSError("seccomp_init failed")
    try:
        newuser = (_ArgCompare * 1)(_ArgCompare(0, _MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
        rules = [("clone", errno.EPERM, newuser), ("unshare", errno.EPERM, newuser),
                 ("clone3", errno.ENOSYS, None)]
        rules += [(name, errno.EPERM, None) for name in DENIED]
        for name, answer, compare in rules:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                continue  # not a system call on this architecture
            if lib.seccomp_rule_add_array(context, _ERRNO | answer, number,
                                          1 if compare else 0, compare) != 0:
                raise OSError(f"seccomp: could not add the rule for {name}")
        if lib.seccomp_load(context) != 0:
            raise OSError("seccomp_load failed")
    finally:
        lib.seccomp_release(context)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_arguments(parser)
    parser.add_argument("--join", action="append", default=[],
                        help="a cgroup.procs file to join first")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    join(args.join)
    apply(args)
    drop_root(args.user)
    if args.syscall_filter:
        install_syscall_filter()
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main())
