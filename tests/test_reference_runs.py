"""Published reference runs (docs/reference-runs/<gpu>/<lesson>.ipynb) say truly whether they
still show today's lessons.

`make gpu-check` writes them from solutions/ on a GPU. A lesson may change without a GPU: its run
then stays published, marked stale (the changed cells and the run's date in its header cell, and
in the index docs/reference-runs/README.md) by `python scripts/gpu_check.py mark-stale`. These
tests fail when a marking is not true: a stale run left unmarked, a run marked stale for cells
that match, or an index that lists them otherwise.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import nbformat
import pytest

from .conftest import ROOT
from .test_gpu_check import load_script

RUNS = ROOT / "docs" / "reference-runs"
gpu_check = load_script()


def test_every_published_run_is_marked_truly():
    """Checks each committed run is marked stale exactly when its lesson's code cells changed."""
    problems = [problem for run in sorted(RUNS.glob("*/*.ipynb"))
                if (problem := gpu_check.marking_problem(run))]
    assert not problems, "\n".join(problems)


def test_the_index_lists_every_run_as_it_is():
    """Checks docs/reference-runs/README.md is what mark-stale writes, and README links it."""
    assert (RUNS / "README.md").read_text(encoding="utf-8") == gpu_check.index_text(RUNS), (
        "run `python scripts/gpu_check.py mark-stale`")
    assert "docs/reference-runs/README.md" in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.fixture
def course(tmp_path, monkeypatch) -> Path:
    """A course with lesson 00 and its reference run, as gpu_check.py writes it."""
    shutil.copytree(ROOT / "solutions" / "00_setup", tmp_path / "solutions" / "00_setup")
    source = next((tmp_path / "solutions" / "00_setup").glob("*.ipynb"))
    notebook = nbformat.read(source, as_version=4)
    header = "**Reference run**\n\n* date: 2026-11-27 06:21 UTC\n"
    notebook.cells.insert(0, nbformat.v4.new_markdown_cell(header, metadata={
        "reference_run": {"date": "2026-11-27 06:21 UTC", "seconds": 9}}))
    run = tmp_path / "docs" / "reference-runs" / "nvidia-h100" / "00_setup.ipynb"
    run.parent.mkdir(parents=True)
    nbformat.write(notebook, run)
    monkeypatch.setattr(gpu_check, "ROOT", tmp_path)
    return tmp_path


def edit_lesson(course: Path, code_cell: int, text: str | None) -> None:
    """Append `text` to one code cell of the lesson (1-based), or delete it (None)."""
    source = next((course / "solutions" / "00_setup").glob("*.ipynb"))
    notebook = nbformat.read(source, as_version=4)
    cell = [cell for cell in notebook.cells if cell.cell_type == "code"][code_cell - 1]
    if text is None:
        notebook.cells.remove(cell)
    else:
        cell.source += text
    nbformat.write(notebook, source)


def published(course: Path) -> Path:
    return course / "docs" / "reference-runs" / "nvidia-h100" / "00_setup.ipynb"


def test_a_fresh_run_is_true_unmarked(course):
    """Checks a run written from today's lesson needs no marking."""
    assert gpu_check.marking_problem(published(course)) is None
    assert "[fresh](nvidia-h100/00_setup.ipynb), ran 2026-11-27 06:21 UTC" in \
        gpu_check.index_text(published(course).parents[1])


def test_a_changed_lesson_is_flagged_until_marked(course):
    """Checks an unmarked stale run fails, and mark-stale names the cells and the run's date."""
    edit_lesson(course, 3, "\nprint('changed')")
    run = published(course)
    assert "stale (code cell 3 changed) but not marked so" in gpu_check.marking_problem(run)
    gpu_check.mark_stale(run.parents[1])
    assert gpu_check.marking_problem(run) is None
    header = nbformat.read(run, as_version=4).cells[0]
    assert header.metadata["reference_run"] == {"date": "2026-11-27 06:21 UTC", "seconds": 9,
                                                "stale": {"changed": [3], "removed": 0}}
    assert "**Stale.** `solutions/00_setup/" in header.source
    assert "since this run (2026-11-27 06:21 UTC): code cell 3 changed." in header.source
    index = (run.parents[1] / "README.md").read_text(encoding="utf-8")
    assert "[**stale**](nvidia-h100/00_setup.ipynb): code cell 3 changed since the run of " \
        "2026-11-27 06:21 UTC" in index


def test_a_run_marked_stale_for_cells_that_match_is_flagged(course):
    """Checks a marking that is no longer true (the lesson changed back) fails, then clears."""
    run = published(course)
    notebook = json.loads(run.read_text(encoding="utf-8"))
    notebook["cells"][0]["metadata"]["reference_run"]["stale"] = {"changed": [3], "removed": 0}
    run.write_text(json.dumps(notebook), encoding="utf-8")
    assert "marked stale, but its code cells match" in gpu_check.marking_problem(run)
    gpu_check.mark_stale(run.parents[1])
    assert gpu_check.marking_problem(run) is None
    assert "Stale" not in nbformat.read(run, as_version=4).cells[0].source


def test_a_removed_cell_and_a_run_without_its_header(course):
    """Checks a deleted code cell counts as a change, and a header edited away is flagged."""
    edit_lesson(course, 2, None)
    assert gpu_check.staleness(published(course)) == {"stale": True, "changed": [],
                                                      "removed": 1}
    notebook = nbformat.read(published(course), as_version=4)
    del notebook.cells[0]
    nbformat.write(notebook, published(course))
    assert "edited by hand" in gpu_check.marking_problem(published(course))
