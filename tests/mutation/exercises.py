"""The exercises, found in the solution notebooks: adding a lesson adds its exercises.

An exercise is an autograded test cell ``test_<id>`` whose first line calls
``checks.check_<x>(name, ...)``, with the solution cell ``<id>`` that defines those names.
A cell that starts with ``%%writefile`` is a script: the check gets the path of a file.
"""
from __future__ import annotations

import ast
import linecache
import re
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


@dataclass(frozen=True)
class Exercise:
    key: str  # "lesson03/crossover"
    lesson: str  # "03_timing"
    grade_id: str
    check: str  # "check_crossover"
    names: tuple[str, ...]  # the answers the test cell passes, in order
    source: str  # the solution cell as Python (a script's magic line blanked)
    imports: str  # the import statements of the notebook's earlier code cells
    script: bool

    def regions(self) -> list[tuple[int, int]]:
        """Line ranges (1-based, inclusive) between BEGIN and END SOLUTION: the learner's part."""
        found, start = [], None
        for number, line in enumerate(self.source.splitlines(), start=1):
            if line.strip() == BEGIN:
                start = number
            elif line.strip() == END and start is not None:
                found.append((start, number))
                start = None
        return found

    def answers(self, source: str, folder: Path | None = None) -> tuple:
        """The answers a version of the solution cell defines (a script: its file's path)."""
        if self.script:
            folder = folder or Path(tempfile.mkdtemp(prefix="mutant-"))
            path = folder / "ddp_train.py"
            path.write_text(source)
            return (str(path),)
        namespace: dict = {}
        exec(compile(self.imports, f"<{self.key} imports>", "exec"), namespace)  # noqa: S102
        # As in a notebook, a traceback can quote the line: messages may cite the learner's code.
        filename = f"<{self.key}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102
        return tuple(namespace[name] for name in self.names)


def _as_python(source: str) -> str:
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def _test_call(source: str) -> tuple[str, tuple[str, ...]] | None:
    for line in source.splitlines():
        if line.startswith("checks."):
            call = ast.parse(line).body[0].value
            return call.func.attr, tuple(arg.id for arg in call.args)
    return None


def _lesson_exercises(path: Path) -> list[Exercise]:
    lesson = path.parent.name
    cells = nbformat.read(path, as_version=4).cells
    by_id = {cell.metadata.get("nbgrader", {}).get("grade_id"): (index, cell)
             for index, cell in enumerate(cells)}
    found = []
    for grade_id, (_, cell) in by_id.items():
        meta = cell.metadata.get("nbgrader", {})
        call = _test_call(cell.source) if meta.get("grade") and cell.cell_type == "code" else None
        answer_id = (grade_id or "").removeprefix("test_")
        if call is None or answer_id not in by_id:
            continue
        index, answer = by_id[answer_id]
        script = answer.source.startswith("%%writefile")
        source = re.sub(r"^%%writefile.*", "", answer.source) if script else answer.source
        imports = [node for earlier in cells[:index] if earlier.cell_type == "code"
                   for node in ast.parse(_as_python(earlier.source)).body
                   if isinstance(node, (ast.Import, ast.ImportFrom))]
        found.append(Exercise(f"lesson{lesson[:2]}/{answer_id}", lesson, answer_id, call[0],
                              call[1], source, ast.unparse(ast.Module(imports, [])), script))
    return found


@cache
def exercises() -> tuple[Exercise, ...]:
    """Every exercise of every lesson in solutions/, in lesson and notebook order."""
    return tuple(exercise for path in sorted((ROOT / "solutions").glob("*/*.ipynb"))
                 for exercise in _lesson_exercises(path))


def exercise(key: str) -> Exercise:
    for found in exercises():
        if found.key == key:
            return found
    raise LookupError(f"no exercise {key!r}; they are: {', '.join(e.key for e in exercises())}")
