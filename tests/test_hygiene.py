"""Committed notebooks are clean, and every lesson has its release."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

from course_utils.tools.hygiene import KERNEL_NAME, clean_notebook, problems

from .conftest import ROOT

NOTEBOOKS = sorted(ROOT.glob("solutions/*/*.ipynb")) + sorted(ROOT.glob("notebooks/*/*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_notebook_is_clean(path):
    """Checks the notebook has no outputs, execution counts or volatile metadata."""
    nb = nbformat.read(path, as_version=4)
    assert problems(nb) == [], f"{path}: run `course clean {path.relative_to(ROOT)}`"


def test_every_lesson_is_released():
    """Checks that each solutions/ lesson has a notebooks/ release with the same notebooks."""
    for lesson in sorted(p for p in (ROOT / "solutions").iterdir() if p.is_dir()):
        sources = sorted(p.name for p in lesson.glob("*.ipynb"))
        released = sorted(p.name for p in (ROOT / "notebooks" / lesson.name).glob("*.ipynb"))
        assert sources and sources == released, f"run `course release {lesson.name}`"


def test_problems_reports_outputs_counts_and_metadata():
    """Checks the hygiene test can fail: a dirty notebook is reported and cleaning fixes it."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    nb.cells[0].execution_count = 3
    nb.cells[0].outputs = [nbformat.v4.new_output("execute_result", {"text/plain": "2"},
                                                  execution_count=3)]
    nb.cells[0].metadata["ExecuteTime"] = {"start": "2026"}
    nb.metadata["widgets"] = {}
    found = problems(nb)
    assert any("outputs" in p for p in found)
    assert any("execution count" in p for p in found)
    assert any("ExecuteTime" in p for p in found)
    assert any("widgets" in p for p in found)
    assert problems(clean_notebook(nb)) == []


def test_notebooks_ask_for_the_kernel_the_course_registers():
    """Checks every notebook names the kernel `make install` registers, and that it exists."""
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(rf"^KERNEL_NAME := {KERNEL_NAME}$", makefile, re.MULTILINE)
    for path in sorted(ROOT.glob("*/[0-9][0-9]_*/*.ipynb")):
        kernelspec = nbformat.read(path, as_version=4).metadata.kernelspec
        assert kernelspec.name == KERNEL_NAME, path
    # make install registers it in the course's environment (--sys-prefix), where Jupyter
    # started from that environment looks.
    spec = Path(sys.prefix) / "share" / "jupyter" / "kernels" / KERNEL_NAME / "kernel.json"
    assert spec.is_file(), f"{spec} is missing: run make install"


def test_graded_cells_have_course_wide_unique_ids():
    """Checks no two lessons share a graded cell's grade_id: grades.csv has one column per id."""
    owners: dict[str, list[str]] = {}
    for path in sorted(ROOT.glob("solutions/*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("grade"):
                owners.setdefault(meta["grade_id"], []).append(path.parent.name)
    assert owners and {gid: where for gid, where in owners.items() if len(where) > 1} == {}
