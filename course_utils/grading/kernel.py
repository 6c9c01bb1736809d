"""Start an IPython kernel under resource limits: ``python -m course_utils.grading.kernel``.

Limits are applied before ipykernel (and torch) load, so a memory bomb fails with
MemoryError inside the student's kernel instead of taking the machine down. When the
grader starts this inside a private mount namespace (``unshare --mount``), ``--hide``
covers folders the student must not read (solutions, gradebook, other submissions)
with an empty tmpfs.
"""
import argparse
import resource
import subprocess
import sys


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memory-mb", type=int, default=0, help="address-space cap; 0 = none")
    parser.add_argument("--max-file-mb", type=int, default=64, help="largest file it may write")
    parser.add_argument("--hide", action="append", default=[], help="folder to cover with tmpfs")
    args, kernel_args = parser.parse_known_args()
    for folder in args.hide:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,ro", "none", folder], check=True)
    if args.memory_mb > 0:
        limit = args.memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    file_limit = args.max_file_mb * 2**20
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.argv = [sys.argv[0], *kernel_args]
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()


if __name__ == "__main__":
    main()
