"""Run a command under resource limits: ``python -I -S limited.py [options] -- CMD...``.

Standard library only, so it can run with ``-I -S`` (no site-packages, about 10 ms) in front
of any command; the grading kernel's launcher calls :func:`apply` itself instead.
In order: join the sandbox's control groups (``--join``: the command and everything it
starts are then counted there, see cgroups.py), set rlimits (they hold for the process and
everything it starts), give up root for an unprivileged user (``--user``), then exec.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys

UNPRIVILEGED = 65534  # "nobody" on every Linux distribution


def join(procs_files: list[str]) -> None:
    """Move this process into each cgroup whose ``cgroup.procs`` file is given."""
    for path in procs_files:
        with open(path, "w") as handle:
            handle.write(str(os.getpid()))


def apply(memory_mb: int, max_file_mb: int, open_files: int = 0) -> None:
    """Cap address space (0: no cap), the size of any file written, open files (0: as it
    is) and core dumps."""
    if memory_mb > 0:
        limit = memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    file_limit = max_file_mb * 2**20
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if open_files > 0:
        resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))


def drop_root(uid: int) -> None:
    """Become ``uid`` (group ``uid``, no supplementary groups) when running as root."""
    if uid < 0 or os.geteuid() != 0:
        return
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--memory-mb", type=int, default=0, help="address-space cap; 0 = none")
    parser.add_argument("--max-file-mb", type=int, default=64, help="largest file it may write")
    parser.add_argument("--open-files", type=int, default=0, help="open files; 0 = as it is")
    parser.add_argument("--user", type=int, default=-1,
                        help="as root: run as this uid (and gid); -1 = stay")


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
    apply(args.memory_mb, args.max_file_mb, args.open_files)
    drop_root(args.user)
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main())
