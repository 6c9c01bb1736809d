"""Start a grading kernel: ``python -m course_utils.grading.kernel [options] -f CONNECTION``.

Limits are applied before anything else loads, so a memory bomb fails with MemoryError
inside the student's kernel instead of taking the machine down; then, when the sandbox was
started as root, the kernel becomes an unprivileged user (``--user``). Then the modules the
lesson it is expected to grade imports (``--preload``) are imported, before the kernel
answers: the grader starts each kernel while the previous submission still runs, so the
≈ 2.5 s of importing torch, matplotlib and friends is off the critical path. A kernel serves
one notebook of one student and is never reused.
"""
import argparse
import contextlib
import importlib
import sys

from course_utils.grading import limited


def preload(modules: list[str]) -> None:
    """Import what the notebooks will import; a module that fails is left for the notebook."""
    for name in modules:
        with contextlib.suppress(Exception):  # the notebook's own import reports it
            importlib.import_module(name)


def main() -> None:
    parser = argparse.ArgumentParser()
    limited.add_arguments(parser)
    parser.add_argument("--preload", action="append", default=[], help="module to import first")
    args, kernel_args = parser.parse_known_args()
    limited.apply(args)
    limited.drop_root(args.user)
    if args.syscall_filter:
        limited.install_syscall_filter()
    preload(args.preload)
    sys.argv = [sys.argv[0], *kernel_args]
    from ipykernel import kernelapp

    kernelapp.launch_new_instance()


if __name__ == "__main__":
    main()
