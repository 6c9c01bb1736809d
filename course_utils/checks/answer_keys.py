"""Answers of hidden cases, read from the instructor's ``solutions/`` on the trusted side.

No answer of a hidden case ships in the package learners import: a check that needs one
(an exercise whose answer is a fact, not a computation) reads the value the instructor's
solution cell assigns. That folder exists where grading happens and in the course
repository, not in a learner's release.
"""
from __future__ import annotations

import ast
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..paths import course_root
from .framework import fail


@lru_cache(maxsize=32)
def _solution_cells(path: Path, modified: float) -> dict[str, str]:
    # Plain JSON: importing nbformat would cost the learner's kernel a second on `import checks`.
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return {cell["metadata"]["nbgrader"]["grade_id"]: "".join(cell["source"]) for cell in cells
            if cell["metadata"].get("nbgrader", {}).get("solution")}


def solution_value(lesson: str, grade_id: str, name: str) -> Any:
    """The literal that the solution cell ``grade_id`` of ``lesson`` assigns to ``name``."""
    try:
        notebooks = sorted((course_root() / "solutions" / lesson).glob("*.ipynb"))
    except FileNotFoundError:
        notebooks = []
    for path in notebooks:
        source = _solution_cells(path, path.stat().st_mtime).get(grade_id)
        if source is None:
            continue
        values = [statement.value for statement in ast.parse(source).body
                  if isinstance(statement, ast.Assign) and any(
                      isinstance(target, ast.Name) and target.id == name
                      for target in statement.targets)]
        if not values:
            raise LookupError(f"solutions/{lesson}: cell {grade_id!r} assigns nothing to {name!r}.")
        return ast.literal_eval(values[-1])  # the solution's, after any stub the learner sees
    fail("The hidden part of this check needs the instructor's solutions/ folder, which is not "
         "here.", "hidden checks run when the course is graded; run the visible check instead.")
