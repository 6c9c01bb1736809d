"""Record grades in nbgrader's gradebook (SQLite by default, any SQLAlchemy URL)."""
from __future__ import annotations

import warnings
from pathlib import Path

import nbformat
import nbgrader
import nbgrader.api
from nbgrader.api import Gradebook as _Gradebook
from nbgrader.api import MissingEntry
from sqlalchemy.exc import SAWarning

from ..paths import ensure_tools_on_path


def _alembic_head() -> str:
    """nbgrader's newest schema revision, stamped into a new gradebook.

    nbgrader asks a separate `alembic` process for it (about 4 s here); alembic's own API
    gives the same answer in-process.
    """
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(Path(nbgrader.__file__).parent / "alembic"))
    return ScriptDirectory.from_config(config).get_current_head()


NBGRADER_ALEMBIC_VERSION = nbgrader.api.get_alembic_version


def Gradebook(db_url: str) -> _Gradebook:  # noqa: N802 - stands in for the class
    ensure_tools_on_path()
    nbgrader.api.get_alembic_version = _alembic_head
    try:
        return _Gradebook(db_url)
    finally:
        nbgrader.api.get_alembic_version = NBGRADER_ALEMBIC_VERSION


def register_lessons(db_url: str, lessons: dict[str, list[Path]]) -> None:
    """Create or update each assignment, its notebooks and graded cells, from the sources."""
    with Gradebook(db_url) as gb:
        for lesson, source_notebooks in lessons.items():
            gb.update_or_create_assignment(lesson)
            for path in source_notebooks:
                _register_notebook(gb, lesson, path)


def _register_notebook(gb: _Gradebook, lesson: str, path: Path) -> None:
    name = path.stem
    gb.update_or_create_notebook(name, lesson)
    for cell in nbformat.read(path, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            gb.update_or_create_grade_cell(meta["grade_id"], name, lesson,
                                           max_score=float(meta.get("points", 0)),
                                           cell_type=cell.cell_type)
        if meta.get("solution"):
            gb.update_or_create_solution_cell(meta["grade_id"], name, lesson)


def record_all(db_url: str, results: list[dict]) -> None:
    """Store every submission's results in one session; re-grading replaces earlier scores."""
    with warnings.catch_warnings(), Gradebook(db_url) as gb:
        # nbgrader's add_submission trips SQLAlchemy's autoflush warning; the rows are right.
        warnings.filterwarnings("ignore", category=SAWarning)
        for result in results:
            _record(gb, result)
        gb.db.commit()


def _record(gb: _Gradebook, result: dict) -> None:
    student, lesson = result["student"], result["lesson"]
    gb.update_or_create_student(student)
    try:
        gb.find_submission(lesson, student)
    except MissingEntry:
        gb.add_submission(lesson, student)
    for notebook in result["notebooks"]:
        for item in notebook["items"]:
            grade = gb.find_grade(item["grade_id"], notebook["name"], lesson, student)
            manual = item["score"] is None  # a written answer: left for the instructor
            grade.auto_score = None if manual else float(item["score"])
            grade.needs_manual_grade = manual
            try:
                comment = gb.find_comment(item["grade_id"], notebook["name"], lesson, student)
                comment.auto_comment = item["message"]
            except MissingEntry:
                pass  # test cells have no comment row in nbgrader's schema
