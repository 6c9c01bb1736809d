"""`course release`: notebooks/ is exactly what nbgrader generates from solutions/."""
from __future__ import annotations

import shutil

import nbformat
import pytest

from course_utils.tools.cli import main
from course_utils.tools.hosted import first_code_cell, update_lessons
from course_utils.tools.release import release

from .conftest import ROOT


def test_release_is_in_sync(capsys, monkeypatch):
    """Checks `course release --check` finds no drift in the committed release."""
    monkeypatch.chdir(ROOT)
    assert main(["release", "--check"]) == 0, capsys.readouterr().out


@pytest.fixture
def small_course(tmp_path):
    """A course folder holding lesson 00 only, to change freely."""
    for folder in ("solutions", "notebooks"):
        shutil.copytree(ROOT / folder / "00_setup", tmp_path / folder / "00_setup")
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    return tmp_path


def test_check_reports_drift_and_release_repairs_it(small_course):
    """Checks an edited solution, and a repository address newly set in pyproject.toml, are
    reported as drift, and a release brings both across: the address into the first cell of
    solutions/ and notebooks/."""
    source = small_course / "solutions" / "00_setup" / "setup.ipynb"
    nb = nbformat.read(source, as_version=4)
    nb.cells[0].source += "\n\nA new sentence."
    nbformat.write(nb, source)
    pyproject = small_course / "pyproject.toml"
    url = "https://git.example.org/course/gpu-course.git"
    pyproject.write_text(pyproject.read_text().replace(
        "[project.urls]\n", f'[project.urls]\nRepository = "{url}"\n'))
    assert update_lessons(small_course, ["00_setup"], write=False) == ["00_setup"]
    assert release(small_course, check=True) == ["00_setup"]
    assert release(small_course) == ["00_setup"]
    assert update_lessons(small_course, ["00_setup"], write=False) == []
    released = nbformat.read(small_course / "notebooks" / "00_setup" / "setup.ipynb", as_version=4)
    assert released.cells[0].source.endswith("A new sentence.")
    assert f'REPOSITORY = "{url}"' in first_code_cell(released).source
    assert "raise NotImplementedError()" in "".join(c.source for c in released.cells)
    assert "BEGIN HIDDEN TESTS" not in "".join(c.source for c in released.cells)


def test_unknown_lesson_is_named(small_course):
    """Checks a misspelt lesson gets an error naming it and listing the lessons."""
    with pytest.raises(ValueError, match=r"'00_stup'.*00_setup"):
        release(small_course, ["00_stup"])
