"""``course release``: make notebooks/ (the learner release) from solutions/ with nbgrader."""
from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from ..paths import check_lessons, ensure_tools_on_path
from .hosted import update_lessons, update_readme
from .hygiene import clean_notebook


class ReleaseError(RuntimeError):
    """nbgrader could not generate a lesson; the message holds its own explanation."""


def generate(root: Path, lesson: str, target: Path) -> None:
    """Run ``nbgrader generate_assignment`` for ``lesson`` (a name or "*") into ``target``."""
    ensure_tools_on_path()
    with tempfile.TemporaryDirectory(prefix="course-release-db-") as db_folder:
        command = [
            sys.executable, "-m", "nbgrader", "generate_assignment", lesson, "--force",
            "--log-level=WARN",
            f"--CourseDirectory.root={root}",
            "--CourseDirectory.source_directory=solutions",
            f"--CourseDirectory.release_directory={target}",
            f"--CourseDirectory.db_url=sqlite:///{db_folder}/gradebook.db",
        ]
        done = subprocess.run(command, check=False, cwd=db_folder, capture_output=True, text=True)
    if done.returncode != 0:
        raise ReleaseError(f"nbgrader could not generate {lesson}:\n{done.stdout}{done.stderr}")
    for path in target.glob(f"{lesson}/*.ipynb"):
        nb = nbformat.read(path, as_version=4)
        nbformat.write(clean_notebook(nb), path)


def _differs(generated: Path, released: Path) -> bool:
    if not released.is_dir():
        return True
    comparison = filecmp.dircmp(generated, released, ignore=[
        ".ipynb_checkpoints", "__pycache__", "lesson08_trace.json"])  # a learner's run writes it
    if comparison.left_only or comparison.right_only or comparison.funny_files:
        return True
    _, mismatch, errors = filecmp.cmpfiles(generated, released, comparison.common_files,
                                           shallow=False)
    return bool(mismatch or errors)


def release(root: Path, lessons: list[str] | None = None, check: bool = False) -> list[str]:
    """Regenerate (or, with ``check``, compare) each lesson; return the lessons that drifted,
    and "README.md" when its Colab and Kaggle links did.

    First each lesson's solutions/ notebook gets today's first cell (hosted.py), which holds
    the repository address from pyproject.toml; with ``check``, a stale one is drift. Last,
    README's links to open the lessons on Colab and Kaggle are written from the same address.
    """
    chosen = check_lessons(root, lessons)
    stale_sources = update_lessons(root, chosen, write=not check)
    drifted = []
    with tempfile.TemporaryDirectory(prefix="course-release-") as folder:
        # nbgrader starts slowly: one run for the whole course when it is all asked for.
        for name in ["*"] if chosen == check_lessons(root, None) else chosen:
            generate(root, name, Path(folder))
        for lesson in chosen:
            generated = Path(folder) / lesson
            released = root / "notebooks" / lesson
            if lesson in stale_sources or _differs(generated, released):
                drifted.append(lesson)
                if not check:
                    shutil.rmtree(released, ignore_errors=True)
                    shutil.copytree(generated, released)
    if update_readme(root, write=not check):
        drifted.append("README.md")
    return drifted
