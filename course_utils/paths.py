"""Where the course's folders are."""
from __future__ import annotations

import os
import sys
from pathlib import Path


def course_root() -> Path:
    """The folder holding solutions/ and notebooks/: $COURSE_ROOT, the cwd, or this checkout."""
    candidates = [os.environ.get("COURSE_ROOT"), Path.cwd(), Path(__file__).resolve().parents[1]]
    for candidate in candidates:
        if candidate and (Path(candidate) / "solutions").is_dir():
            return Path(candidate).resolve()
    raise FileNotFoundError("No course folder found: run this inside the course checkout "
                            "(the folder with solutions/) or set COURSE_ROOT.")


def lessons(root: Path) -> list[str]:
    """Every lesson id (a folder of solutions/), in order."""
    return sorted(path.name for path in (root / "solutions").iterdir()
                  if path.is_dir() and not path.name.startswith("."))


def lesson_notebooks(root: Path, lesson: str) -> list[Path]:
    """The source notebooks of one lesson."""
    return sorted((root / "solutions" / lesson).glob("*.ipynb"))


def check_lessons(root: Path, requested: list[str] | None) -> list[str]:
    """The requested lessons (all when None), or ValueError naming an unknown one."""
    known = lessons(root)
    if not requested:
        return known
    unknown = [name for name in requested if name not in known]
    if unknown:
        raise ValueError(f"Unknown lesson(s) {', '.join(map(repr, unknown))}; "
                         f"the lessons are: {', '.join(known)}.")
    return list(requested)


def ensure_tools_on_path() -> None:
    """nbgrader runs the `alembic` executable: make this environment's scripts findable."""
    scripts = str(Path(sys.executable).parent)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")
