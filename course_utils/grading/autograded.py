"""Executed copies of the submissions, where nbgrader's formgrader expects them.

``<out>/autograded/<student>/<lesson>/<notebook>.ipynb``: the student's cells with the
outputs the grading kernel produced, and each test cell showing its verdict instead of its
code's output. Test cells show the released source: hidden tests never appear.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat

from .structure import InvalidSubmission, grade_items, read_submission


HIDDEN_BLOCK = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS\n?", re.DOTALL)


def build(notebook_job: dict, notebook_result: dict) -> nbformat.NotebookNode | None:
    """The autograded notebook of one submitted file, or None when it could not be read."""
    try:
        nb = read_submission(Path(notebook_job["submitted"]))
    except (InvalidSubmission, OSError):
        return None
    released = {item.grade_id: item for item in
                grade_items(Path(notebook_job["source"]), Path(notebook_job["release"]))}
    verdicts = {item["grade_id"]: item for item in notebook_result["items"]}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        cell.outputs = [nbformat.from_dict(output)
                        for output in notebook_result["outputs"].get(str(index), [])]
        cell.execution_count = None
        cell.source = HIDDEN_BLOCK.sub("", cell.source)  # e.g. a renamed copy of a test cell
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        item = released.get(grade_id)
        if item is not None and item.auto:
            cell.source = item.released_source
            verdict = verdicts[grade_id]
            text = f"{verdict['score']:g} / {verdict['points']:g}: {verdict['message']}\n"
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    return nb


def write_all(folder: Path, work: list[dict], results: list[dict]) -> None:
    for job, result in zip(work, results):
        for notebook_job, notebook_result in zip(job["notebooks"], result["notebooks"]):
            nb = build(notebook_job, notebook_result)
            if nb is None:
                continue
            target = folder / job["student"] / job["lesson"] / f"{notebook_job['name']}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, target)
