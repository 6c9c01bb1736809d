"""The gradebook course grade writes is one nbgrader itself can open and upgrade."""
from __future__ import annotations

import sqlite3
import subprocess
import sys

import nbgrader.api
import pytest

from course_utils.grading import gradebook
from course_utils.grading.structure import load_lesson
from course_utils.paths import ensure_tools_on_path

from .conftest import ROOT


def test_in_process_alembic_head_matches_nbgraders_own(tmp_path):
    """Checks the revision stamped into new gradebooks is the one nbgrader would stamp, and
    that nbgrader's own function is back in place afterwards."""
    ensure_tools_on_path()
    nbgraders_own = nbgrader.api.get_alembic_version
    gradebook.Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}").close()
    assert nbgrader.api.get_alembic_version is nbgraders_own
    assert gradebook._alembic_head() == nbgraders_own()


def test_registered_lessons_have_their_graded_cells(tmp_path):
    """Checks a new gradebook holds each lesson's graded cells with their points."""
    db = tmp_path / "gradebook.db"
    gradebook.register_lessons(f"sqlite:///{db}", [load_lesson(ROOT, "00_setup")])
    with sqlite3.connect(db) as connection:
        (revision,) = connection.execute("select version_num from alembic_version").fetchone()
        cells = dict(connection.execute("select base_cell.name, grade_cells.max_score from "
                                        "grade_cells join base_cell "
                                        "on grade_cells.id = base_cell.id"))
    assert revision == gradebook._alembic_head()
    assert cells == {"test_pick_device": 2.0, "test_gpu_inventory": 2.0, "hardcoded_cuda": 2.0}


def test_a_plain_postgresql_url_means_psycopg_3():
    """Checks postgresql:// is opened with psycopg 3, the driver the postgres extra installs."""
    url = gradebook.database_url("postgresql://teacher@db.example/course")
    assert url == "postgresql+psycopg://teacher@db.example/course"


@pytest.mark.parametrize("url, message", [
    ("nonsense", "is not a database URL"),
    ("oracle2000://x/y", "unknown database kind"),
])
def test_bad_urls_are_named(url, message):
    """Checks an unusable --db value is a ValueError naming it."""
    with pytest.raises(gradebook.GradebookUnavailable, match=message):
        gradebook.database_url(url)


def test_a_missing_driver_is_one_line_naming_the_extra():
    """Checks `course grade --db postgresql://...` without psycopg installed exits 2 with one
    line saying which extra to install, and does not print the password."""
    code = ("import sys; sys.modules['psycopg'] = None  # as if it were not installed\n"
            "from course_utils.tools.cli import main\n"
            "sys.exit(main(['grade', '.', '--db', 'postgresql://teacher:s3cret@db.example/c']))")
    done = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "psycopg 3" in lines[0] and "pip install -e '.[postgres]'" in lines[0]
    assert "s3cret" not in done.stderr
