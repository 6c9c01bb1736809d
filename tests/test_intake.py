"""Submissions are data, read defensively: links, renamed files, odd files, hostile JSON."""
from __future__ import annotations

import json
import os
import shutil

import nbformat
import pytest

from course_utils.grading.intake import InvalidSubmission, discover, read_notebook
from course_utils.grading.records import Status
from course_utils.grading.structure import load_lesson

from .conftest import ROOT

LESSON = "00_setup"
CAP = 50 * 2**20


@pytest.fixture(scope="module")
def lessons():
    return {LESSON: load_lesson(ROOT, LESSON)}


@pytest.fixture
def folder(tmp_path):
    return tmp_path / "submissions"


def put(folder, relative, content="{}"):
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


def found(folder, lessons, cap=CAP):
    return {(s.student, s.lesson): s.notebooks[0] for s in discover(folder, lessons, cap)}


def test_the_expected_file_is_taken(folder, lessons):
    """Checks a correctly named notebook is graded with no note."""
    path = put(folder, "ada/00_setup/setup.ipynb")
    notebook = found(folder, lessons)[("ada", LESSON)]
    assert (notebook.path, notebook.problem, notebook.note) == (path, None, "")


def test_one_renamed_notebook_is_graded_with_a_note(folder, lessons):
    """Checks `setup (1).ipynb` alone is graded in place of setup.ipynb, and the reason says so."""
    path = put(folder, "ada/00_setup/setup (1).ipynb")
    put(folder, "ada/00_setup/notes.txt")
    put(folder, "ada/00_setup/._setup.ipynb")  # macOS archive debris is not a candidate
    notebook = found(folder, lessons)[("ada", LESSON)]
    assert notebook.path == path
    assert notebook.note == "graded 'setup (1).ipynb': no file named setup.ipynb was submitted"


def test_without_a_clear_candidate_the_reason_lists_what_was_found(folder, lessons):
    """Checks two candidates, or none, give `missing` with the folder's content."""
    put(folder, "ada/00_setup/a.ipynb")
    put(folder, "ada/00_setup/b.ipynb")
    (folder / "bob" / LESSON).mkdir(parents=True)
    put(folder, "cy/00_setup/answers.py")
    rows = found(folder, lessons)
    assert rows[("ada", LESSON)].problem is Status.MISSING
    assert rows[("ada", LESSON)].note == ("no file named setup.ipynb was submitted; "
                                          "found 'a.ipynb', 'b.ipynb'")
    assert rows[("bob", LESSON)].note.endswith("; the folder is empty")
    assert rows[("cy", LESSON)].note.endswith("found 'answers.py'")


def test_long_listings_are_cut(folder, lessons):
    """Checks a folder with many files gives a reason of bounded length."""
    for index in range(30):
        put(folder, f"ada/00_setup/file{index:02d}.txt")
    assert found(folder, lessons)[("ada", LESSON)].note.endswith("'file09.txt' and 20 more")


@pytest.mark.parametrize("layout", ["notebook", "lesson", "student", "renamed"])
def test_symbolic_links_are_never_followed(folder, lessons, layout):
    """Checks a link at any level to the instructor's solutions is invalid, not graded."""
    solutions = ROOT / "solutions" / LESSON
    if layout == "notebook":
        (folder / "ada" / LESSON).mkdir(parents=True)
        os.symlink(solutions / "setup.ipynb", folder / "ada" / LESSON / "setup.ipynb")
    elif layout == "lesson":
        (folder / "ada").mkdir(parents=True)
        os.symlink(solutions, folder / "ada" / LESSON)
    elif layout == "student":
        folder.mkdir()
        (folder / "elsewhere" / LESSON).mkdir(parents=True)
        shutil.copy(solutions / "setup.ipynb", folder / "elsewhere" / LESSON)
        os.symlink(folder / "elsewhere", folder / "ada")
    else:
        (folder / "ada" / LESSON).mkdir(parents=True)
        os.symlink(solutions / "setup.ipynb", folder / "ada" / LESSON / "setup (1).ipynb")
    notebook = found(folder, lessons)[("ada", LESSON)]
    assert (notebook.path, notebook.problem) == (None, Status.INVALID)
    assert "is a symbolic link" in notebook.note


def test_a_fifo_or_a_folder_is_not_a_notebook(folder, lessons):
    """Checks special files are refused without being opened (a FIFO would block a reader)."""
    (folder / "ada" / LESSON).mkdir(parents=True)
    os.mkfifo(folder / "ada" / LESSON / "setup.ipynb")
    (folder / "bob" / LESSON / "setup.ipynb").mkdir(parents=True)
    rows = found(folder, lessons)
    for student in ("ada", "bob"):
        assert rows[(student, LESSON)].problem is Status.INVALID
        assert rows[(student, LESSON)].note == "'setup.ipynb' is not a regular file"


def test_files_over_the_cap_are_not_read(folder, lessons):
    """Checks the size cap is applied at discovery and again when reading."""
    path = put(folder, "ada/00_setup/setup.ipynb", "x" * 3000)
    notebook = found(folder, lessons, cap=2048)[("ada", LESSON)]
    assert notebook.problem is Status.INVALID
    assert "notebooks over 0.00195312 MiB are not graded (--max-notebook-mb)" in notebook.note
    with pytest.raises(InvalidSubmission, match="--max-notebook-mb"):
        read_notebook(path, 2048)


def test_a_link_swapped_in_after_discovery_is_still_refused(tmp_path):
    """Checks reading uses O_NOFOLLOW, not a check made earlier."""
    link = tmp_path / "setup.ipynb"
    os.symlink(ROOT / "solutions" / LESSON / "setup.ipynb", link)
    with pytest.raises(InvalidSubmission, match="is a symbolic link"):
        read_notebook(link, CAP)


@pytest.mark.parametrize("content, reason", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"nbformat": 4, "nbformat_minor": 5, "metadata": {"x": ' + "[" * 50_000 + "]" * 50_000
     + '}, "cells": []}', "nested too deeply"),
    (b"\xff\xfe\x00garbage", "not text"),
    ('{"cells": [', "not valid JSON"),
    ("[1, 2]", "not a Jupyter notebook"),
    ('{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "nope"}]}',
     "does not follow the nbformat schema"),
])
def test_unparseable_files_raise_one_line_reasons(tmp_path, content, reason):
    """Checks every parse failure, RecursionError included, is InvalidSubmission in one line."""
    path = tmp_path / "setup.ipynb"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(InvalidSubmission) as raised:
        read_notebook(path, CAP)
    assert reason in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_real_notebook_reads_back(tmp_path):
    """Checks the instructor's solution, copied, parses as the same notebook."""
    path = tmp_path / "setup.ipynb"
    shutil.copy(ROOT / "solutions" / LESSON / "setup.ipynb", path)
    nb = read_notebook(path, CAP)
    assert nb == nbformat.read(path, as_version=4)
    assert json.loads(path.read_text())["nbformat"] == 4
