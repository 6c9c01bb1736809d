"""What a lesson grades (from the trusted source) and what a submission changed."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from .testcells import CheckCall, parse_test_cell


class InvalidSubmission(ValueError):
    """The file is not a gradable notebook; the message says why."""


@dataclass(frozen=True)
class GradeItem:
    """One graded cell of the source notebook."""

    grade_id: str
    points: float
    auto: bool  # False: graded by hand (a written answer)
    docstring: str = ""
    calls: tuple[CheckCall, ...] = ()
    released_source: str = ""
    source_source: str = ""  # the instructor's version, hidden tests included
    released_nbgrader: dict = field(default_factory=dict)


def _nbgrader(cell) -> dict:
    return dict(cell.metadata.get("nbgrader", {}))


def grade_items(source_path: Path, release_path: Path) -> list[GradeItem]:
    """The graded cells, in order, with points and checks taken from trusted files."""
    source = nbformat.read(source_path, as_version=4)
    release = nbformat.read(release_path, as_version=4)
    released = {_nbgrader(cell).get("grade_id"): cell for cell in release.cells
                if _nbgrader(cell).get("grade")}
    items = []
    for cell in source.cells:
        meta = _nbgrader(cell)
        if not meta.get("grade"):
            continue
        grade_id = meta["grade_id"]
        released_cell = released.get(grade_id)
        if released_cell is None:
            raise RuntimeError(f"{release_path} lacks graded cell {grade_id!r}: run `course release`")
        auto = cell.cell_type == "code" and not meta.get("solution")
        docstring, calls = parse_test_cell(cell.source) if auto else ("", [])
        items.append(GradeItem(grade_id, float(meta.get("points", 0)), auto, docstring,
                               tuple(calls), released_cell.source, cell.source,
                               _nbgrader(released_cell)))
    return items


def read_submission(path: Path) -> nbformat.NotebookNode:
    """Read a student's file, or raise InvalidSubmission naming what is wrong with it."""
    try:
        raw = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidSubmission("the file is not text (not a notebook)") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as error:
        raise InvalidSubmission(f"the file is not valid JSON ({error.msg}, line {error.lineno})") \
            from None
    if not isinstance(data, dict) or "cells" not in data or "nbformat" not in data:
        raise InvalidSubmission("the file is JSON but not a Jupyter notebook (no cells/nbformat)")
    if data.get("nbformat") != 4:
        raise InvalidSubmission(
            f"the notebook is nbformat version {data.get('nbformat')!r}; version 4 is required")
    try:
        nb = nbformat.reads(raw, as_version=4)
        nbformat.validate(nb)
    except Exception as error:  # noqa: BLE001 - nbformat raises several kinds
        raise InvalidSubmission(f"the notebook does not follow the nbformat schema: "
                                f"{str(error).splitlines()[0]}") from None
    return nb


def tampering(nb: nbformat.NotebookNode, items: list[GradeItem]) -> dict[str, str]:
    """grade_id -> reason, for graded cells that were deleted, duplicated or changed."""
    by_id: dict[str, list] = {}
    for cell in nb.cells:
        grade_id = _nbgrader(cell).get("grade_id")
        if grade_id:
            by_id.setdefault(grade_id, []).append(cell)
    problems = {}
    for item in items:
        cells = by_id.get(item.grade_id, [])
        if not cells:
            problems[item.grade_id] = f"the graded cell '{item.grade_id}' is missing (deleted, " \
                                      "or its metadata was changed or renamed)"
        elif len(cells) > 1:
            problems[item.grade_id] = f"the graded cell '{item.grade_id}' appears {len(cells)} " \
                                      "times (duplicated)"
        elif item.auto and cells[0].source.strip() not in (item.released_source.strip(),
                                                           item.source_source.strip()):
            problems[item.grade_id] = f"the test cell '{item.grade_id}' was edited"
        elif _comparable(_nbgrader(cells[0])) != _comparable(item.released_nbgrader):
            problems[item.grade_id] = f"the metadata of '{item.grade_id}' was changed " \
                                      "(points, grade or lock flags)"
        elif cells[0].cell_type != ("code" if item.auto else cells[0].cell_type):
            problems[item.grade_id] = f"the cell '{item.grade_id}' changed type"
    return problems


def _comparable(meta: dict) -> dict:
    return {key: meta.get(key) for key in ("grade", "solution", "locked", "points", "task")}
