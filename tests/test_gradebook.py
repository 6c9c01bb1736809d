"""The gradebook course grade writes is one nbgrader itself can open and upgrade."""
from __future__ import annotations

import sqlite3

import nbgrader.api

from course_utils.grading import gradebook
from course_utils.paths import ensure_tools_on_path, lesson_notebooks

from .conftest import ROOT


def test_in_process_alembic_head_matches_nbgraders_own():
    """Checks the revision stamped into new gradebooks is the one nbgrader would stamp."""
    ensure_tools_on_path()
    assert gradebook.NBGRADER_ALEMBIC_VERSION is not gradebook._alembic_head
    assert nbgrader.api.get_alembic_version is gradebook.NBGRADER_ALEMBIC_VERSION  # restored
    assert gradebook._alembic_head() == gradebook.NBGRADER_ALEMBIC_VERSION()


def test_registered_lessons_have_their_graded_cells(tmp_path):
    """Checks a new gradebook holds each lesson's graded cells with their points."""
    db = tmp_path / "gradebook.db"
    gradebook.register_lessons(f"sqlite:///{db}", {"00_setup": lesson_notebooks(ROOT, "00_setup")})
    with sqlite3.connect(db) as connection:
        (revision,) = connection.execute("select version_num from alembic_version").fetchone()
        cells = dict(connection.execute("select base_cell.name, grade_cells.max_score from "
                                        "grade_cells join base_cell on grade_cells.id = base_cell.id"))
    assert revision == gradebook._alembic_head()
    assert cells == {"test_pick_device": 2.0, "test_gpu_inventory": 2.0, "hardcoded_cuda": 2.0}
