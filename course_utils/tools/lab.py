"""``course lab``: JupyterLab on the course, with the learner's (or the instructor's) settings.

Every route into the course starts its lab here: ``make lab``, ``make instructor`` and the conda
environment (README: "Conda"), so that each opens the same lab. The settings are the course's
own (jupyter/README.md), passed through environment variables and flags; nothing is written to
``~/.jupyter`` or the environment's global configuration:

- ``JUPYTER_CONFIG_PATH`` starts with ``jupyter/learner`` (``jupyter/instructor`` with
  ``--instructor``): which nbgrader tools the lab offers, no news pop-up, offline HTML export;
- ``JUPYTER_PATH`` starts with ``jupyter/share``: templates that load nothing from a CDN;
- ``--LabApp.app_settings_dir=jupyter/lab-settings``: JupyterLab's defaults for the course;
- the lab's root: ``notebooks/`` for learners, the whole course for instructors (formgrader);
- the working folder is the course's, where nbgrader (Validate included) reads
  ``nbgrader_config.py``;
- the kernel every notebook names, ``gpu-course``, is registered in this environment first if
  it is not yet (``make lab`` registers it on install; a conda environment may not have it).

Other arguments go to JupyterLab as they are (``course lab --no-browser --port 8899``).
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

KERNEL_NAME = "gpu-course"
KERNEL_DISPLAY_NAME = "Python (GPU course)"


def _prepend(folder: Path, existing: str | None) -> str:
    return os.pathsep.join([str(folder), *([existing] if existing else [])])


def lab_environment(root: Path, instructor: bool, environ: dict[str, str]) -> dict[str, str]:
    """``environ`` with the course's Jupyter settings first on Jupyter's search paths."""
    jupyter = root / "jupyter"
    env = dict(environ)
    env["JUPYTER_CONFIG_PATH"] = _prepend(jupyter / ("instructor" if instructor else "learner"),
                                          environ.get("JUPYTER_CONFIG_PATH"))
    env["JUPYTER_PATH"] = _prepend(jupyter / "share", environ.get("JUPYTER_PATH"))
    if instructor:  # formgrader runs `alembic` (gradebook migrations) from PATH
        env["PATH"] = _prepend(Path(sys.executable).parent, environ.get("PATH"))
    return env


def lab_command(root: Path, instructor: bool, flags: list[str]) -> list[str]:
    """The JupyterLab command line: this Python's JupyterLab, the course's settings, ``flags``."""
    command = [sys.executable, "-m", "jupyterlab",
               f"--ServerApp.root_dir={root if instructor else root / 'notebooks'}",
               f"--LabApp.app_settings_dir={root / 'jupyter' / 'lab-settings'}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers, CI: Jupyter asks for it
        command.append("--allow-root")
    return [*command, *flags]


def ensure_kernel() -> bool:
    """Register the ``gpu-course`` kernel in this environment unless Jupyter finds it already;
    True when it was registered now."""
    from jupyter_client.kernelspec import KernelSpecManager

    if KERNEL_NAME in KernelSpecManager().find_kernel_specs():
        return False
    from ipykernel.kernelspec import install

    install(kernel_name=KERNEL_NAME, display_name=KERNEL_DISPLAY_NAME, prefix=sys.prefix)
    print(f"Registered the kernel {KERNEL_DISPLAY_NAME!r} ({KERNEL_NAME}) in {sys.prefix}.",
          flush=True)
    return True


def main(instructor: bool, flags: list[str]) -> int:
    """Start the lab in the course's folder; on POSIX this process becomes JupyterLab."""
    from ..paths import course_root

    root = course_root()
    ensure_kernel()
    command = lab_command(root, instructor, flags)
    env = lab_environment(root, instructor, dict(os.environ))
    if os.name == "posix":  # signals (Ctrl-C, a test's SIGTERM) reach JupyterLab itself
        os.chdir(root)
        os.execve(command[0], command, env)
    return subprocess.call(command, cwd=root, env=env)
