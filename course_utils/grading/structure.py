"""What a lesson grades (from the trusted source) and what a submission changed.

The instructor's notebooks (source and release) are read once per run, here, into
:class:`Lesson` records that the workers, the gradebook and the feedback share.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..paths import lesson_notebooks
from .testcells import CheckCall, parse_test_cell

if TYPE_CHECKING:
    from nbformat import NotebookNode


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
    cell_type: str = "code"


@dataclass(frozen=True)
class LessonNotebook:
    """One notebook of a lesson, as the instructor wrote it."""

    lesson: str
    filename: str  # e.g. "setup.ipynb"
    items: tuple[GradeItem, ...]
    solution_cells: tuple[str, ...]  # grade_ids of answer cells (nbgrader registers them too)
    given: frozenset[str] = frozenset()  # code cells as released (not the learner's: review.py)
    # The texts (stripped) of the instructor's own code cells: a submitted cell with one of
    # them is the lesson's demonstration, unchanged, which grading may skip (needed.py).
    lesson_cells: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return Path(self.filename).stem


@dataclass(frozen=True)
class Lesson:
    name: str
    notebooks: tuple[LessonNotebook, ...]
    imports: tuple[str, ...] = ()  # modules its notebooks import (kernels load them early)


def load_lesson(root: Path, lesson: str) -> Lesson:
    """Read a lesson's source and released notebooks (once per run)."""
    import nbformat  # here, not at module level: grading workers import this module early

    notebooks, imports = [], []
    for source_path in lesson_notebooks(root, lesson):
        release_path = root / "notebooks" / lesson / source_path.name
        if not release_path.exists():
            raise RuntimeError(f"{release_path} is missing: run `course release`")
        source = nbformat.read(source_path, as_version=4)
        release = nbformat.read(release_path, as_version=4)
        solution_cells = tuple(_nbgrader(cell)["grade_id"] for cell in source.cells
                               if _nbgrader(cell).get("solution"))
        imports += [name for cell in source.cells if cell.cell_type == "code"
                    for name in imported_modules(cell.source) if name not in imports]
        given = frozenset(cell.source for cell in release.cells if cell.cell_type == "code")
        lesson_cells = frozenset(cell.source.strip() for notebook in (source, release)
                                 for cell in notebook.cells if cell.cell_type == "code"
                                 and not _nbgrader(cell).get("solution"))
        notebooks.append(LessonNotebook(lesson, source_path.name,
                                        tuple(grade_items(source, release, release_path)),
                                        solution_cells, given, lesson_cells))
    return Lesson(lesson, tuple(notebooks), tuple(dict.fromkeys(imports)))


def imported_modules(source: str) -> list[str]:
    """Modules a cell imports: ``import a.b`` gives a.b; ``from a import b`` gives a and a.b
    (b may be a module). IPython magics and shell lines are skipped."""
    code = "\n".join(line for line in source.splitlines()
                     if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module != "__future__":
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names
                                      if alias.name != "*"]
    return names


def _nbgrader(cell) -> dict:
    return dict(cell.metadata.get("nbgrader", {}))


def grade_items(source: NotebookNode, release: NotebookNode,
                release_path: Path) -> list[GradeItem]:
    """The graded cells, in order, with points and checks taken from the trusted notebooks."""
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
            raise RuntimeError(f"{release_path} lacks graded cell {grade_id!r}: "
                               "run `course release`")
        auto = cell.cell_type == "code" and not meta.get("solution")
        docstring, calls = parse_test_cell(cell.source) if auto else ("", [])
        items.append(GradeItem(grade_id, float(meta.get("points", 0)), auto, docstring,
                               tuple(calls), released_cell.source, cell.source,
                               _nbgrader(released_cell), cell.cell_type))
    return items


def tampering(nb: NotebookNode, items: tuple[GradeItem, ...]) -> dict[str, str]:
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
