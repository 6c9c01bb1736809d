"""Run a command under resource limits: ``python -I -S limited.py --memory-mb N -- CMD...``.

Standard library only, so it can run with ``-I -S`` (no site-packages, about 10 ms) in front
of any command; the grading kernel's launcher calls :func:`apply` itself instead.
Limits are rlimits: they hold for the process and everything it starts.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys


def apply(memory_mb: int, max_file_mb: int) -> None:
    """Cap data memory (0: no cap), the size of any file written, and core dumps.

    The memory cap is RLIMIT_DATA: the private writable memory that allocations take (heap,
    anonymous mappings, tensors), not the address space. PyPI's CUDA build of torch maps
    about 3 GiB of CUDA libraries when imported, even without a driver, so an address-space
    cap of a few GiB killed or stalled every kernel that imported it.
    """
    if memory_mb > 0:
        limit = memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    file_limit = max_file_mb * 2**20
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--memory-mb", type=int, default=0, help="data-memory cap; 0 = none")
    parser.add_argument("--max-file-mb", type=int, default=64, help="largest file it may write")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    add_arguments(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    apply(args.memory_mb, args.max_file_mb)
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main())
