"""Published reference runs (docs/reference-runs/<gpu>/<lesson>.ipynb) still show today's lessons.

`make gpu-check` writes them from solutions/ on a GPU; a lesson changed since then makes its
reference run stale, and this test names it. With no reference run committed it passes.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from .conftest import ROOT

RUNS = ROOT / "docs" / "reference-runs"


def code_cells(path: Path) -> list[str]:
    notebook = nbformat.read(path, as_version=4)
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


def stale_reason(run: Path, solutions: Path = ROOT / "solutions") -> str | None:
    """Why a reference run no longer matches its lesson, or None when it does."""
    sources = sorted((solutions / run.stem).glob("*.ipynb"))
    if len(sources) != 1:
        return f"{run.relative_to(run.parents[1])}: no lesson solutions/{run.stem}/ to compare"
    first = nbformat.read(run, as_version=4).cells[0]
    if not first.metadata.get("reference_run"):
        return f"{run.name}: its first cell is not the generated header; was it edited by hand?"
    ran, today = code_cells(run), code_cells(sources[0])
    if ran == today:
        return None
    changed = next((index for index, (old, new) in enumerate(zip(ran, today, strict=False))
                    if old != new), min(len(ran), len(today)))
    return (f"{run.parent.name}/{run.name}: code cell {changed + 1} differs from "
            f"{sources[0].relative_to(solutions.parent)} ({len(ran)} code cells ran, "
            f"{len(today)} now); run `make gpu-check` on a GPU again (docs/gpu-check.md)")


def test_reference_runs_match_the_lessons():
    """Checks every committed reference run executed the lesson's current code cells."""
    stale = [reason for run in sorted(RUNS.glob("*/*.ipynb")) if (reason := stale_reason(run))]
    assert not stale, "\n".join(stale)


@pytest.fixture
def published(tmp_path) -> Path:
    """A reference run of lesson 00 as gpu_check.py writes it: header cell, then the lesson."""
    source = next((ROOT / "solutions" / "00_setup").glob("*.ipynb"))
    notebook = nbformat.read(source, as_version=4)
    notebook.cells.insert(0, nbformat.v4.new_markdown_cell("header",
                                                           metadata={"reference_run": True}))
    run = tmp_path / "nvidia-h100" / "00_setup.ipynb"
    run.parent.mkdir()
    nbformat.write(notebook, run)
    return run


def test_a_fresh_reference_run_matches(published):
    """Checks a run written from today's lesson is not flagged."""
    assert stale_reason(published) is None


def test_a_changed_lesson_is_flagged(published):
    """Checks a reference run is flagged once a code cell of its lesson changes."""
    notebook = nbformat.read(published, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    code[2].source += "\nprint('changed')"
    nbformat.write(notebook, published)
    assert "code cell 3 differs" in stale_reason(published)


def test_a_run_without_its_header_is_flagged(published):
    """Checks a run whose generated header is gone is flagged as edited by hand."""
    notebook = nbformat.read(published, as_version=4)
    del notebook.cells[0]
    nbformat.write(notebook, published)
    assert "edited by hand" in stale_reason(published)
