"""Executed copies of the submissions, where nbgrader's formgrader expects them.

``<out>/autograded/<student>/<lesson>/<notebook>.ipynb``: the student's cells with the
outputs the grading kernel produced, and each test cell showing its verdict instead of its
code's output. Test cells show the released source: hidden tests never appear.

Written by the grading worker from the notebook it has already read and run, so the
student's file is read once and the main process never parses it.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from .records import NotebookResult
from .structure import LessonNotebook

if TYPE_CHECKING:
    from nbformat import NotebookNode

HIDDEN_BLOCK = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", re.DOTALL)


def build(nb: NotebookNode, spec: LessonNotebook, result: NotebookResult,
          outputs: dict[int, list]) -> NotebookNode:
    """The graded copy of a submitted notebook (``nb`` is changed in place and returned)."""
    import nbformat  # already loaded by the worker that read the notebook

    released = {item.grade_id: item for item in spec.items}
    verdicts = {item.grade_id: item for item in result.items}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        cell.outputs = [nbformat.from_dict(output) for output in outputs.get(index, [])]
        cell.execution_count = None
        cell.source = HIDDEN_BLOCK.sub("", cell.source)  # e.g. a renamed copy of a test cell
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        item = released.get(grade_id)
        if item is not None and item.auto:
            cell.source = item.released_source
            verdict = verdicts[grade_id]
            text = f"{verdict.score:g} / {verdict.points:g}: {verdict.message}\n"
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    if result.review:  # formgrader shows this copy: the flag is the first thing seen
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(
            f"**Flagged for review** (graded as usual): {result.review}"))
    return nb


def write_autograded(target: Path, nb: NotebookNode, spec: LessonNotebook,
                     result: NotebookResult, outputs: dict[int, list]) -> bool:
    """Write the graded copy; False when this notebook cannot be written (the grade stands)."""
    import nbformat

    try:
        graded = build(nb, spec, result, outputs)
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(graded, target)
    except Exception:  # noqa: BLE001 - e.g. metadata nested too deeply to serialise
        target.unlink(missing_ok=True)
        return False
    return True
