"""Record grades in nbgrader's gradebook (SQLite by default, any SQLAlchemy URL)."""
from __future__ import annotations

import warnings
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook as _Gradebook
from nbgrader.api import MissingEntry
from sqlalchemy.exc import SAWarning

from ..paths import ensure_tools_on_path


def Gradebook(db_url: str) -> _Gradebook:  # noqa: N802 - stands in for the class
    ensure_tools_on_path()
    return _Gradebook(db_url)


def register_lesson(db_url: str, lesson: str, source_notebooks: list[Path]) -> None:
    """Create or update the assignment, its notebooks and graded cells, from the sources."""
    with Gradebook(db_url) as gb:
        gb.update_or_create_assignment(lesson)
        for path in source_notebooks:
            name = path.stem
            gb.update_or_create_notebook(name, lesson)
            nb = nbformat.read(path, as_version=4)
            for cell in nb.cells:
                meta = cell.metadata.get("nbgrader", {})
                if meta.get("grade"):
                    gb.update_or_create_grade_cell(
                        meta["grade_id"], name, lesson, max_score=float(meta.get("points", 0)),
                        cell_type=cell.cell_type)
                if meta.get("solution"):
                    gb.update_or_create_solution_cell(meta["grade_id"], name, lesson)


def record(db_url: str, result: dict) -> None:
    """Store one submission's results; re-grading replaces the earlier scores."""
    with warnings.catch_warnings():
        # nbgrader's add_submission trips SQLAlchemy's autoflush warning; the rows are right.
        warnings.filterwarnings("ignore", category=SAWarning)
        _record(db_url, result)


def _record(db_url: str, result: dict) -> None:
    student, lesson = result["student"], result["lesson"]
    with Gradebook(db_url) as gb:
        gb.update_or_create_student(student)
        try:
            gb.find_submission(lesson, student)
        except MissingEntry:
            gb.add_submission(lesson, student)
        for notebook in result["notebooks"]:
            for item in notebook["items"]:
                grade = gb.find_grade(item["grade_id"], notebook["name"], lesson, student)
                if item["score"] is None:  # a written answer: left for the instructor
                    grade.auto_score = None
                    grade.needs_manual_grade = True
                else:
                    grade.auto_score = float(item["score"])
                    grade.needs_manual_grade = False
                try:
                    comment = gb.find_comment(item["grade_id"], notebook["name"], lesson, student)
                    comment.auto_comment = item["message"]
                except MissingEntry:
                    pass  # test cells have no comment row in nbgrader's schema
        gb.db.commit()
