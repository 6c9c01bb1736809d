"""Reference answers for tests, taken from the instructor's solutions/ by grade_id.

The solution cell is executed after the import statements of the notebook's earlier code
cells, so tests check exactly what the lesson ships as its model answer.
"""
from __future__ import annotations

import ast
from functools import cache

import nbformat

from .conftest import ROOT


@cache
def _namespace(lesson: str, grade_id: str) -> dict:
    (path,) = sorted((ROOT / "solutions" / lesson).glob("*.ipynb"))
    imports, namespace = [], {}
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            exec(compile(ast.Module(imports, []), str(path), "exec"), namespace)  # noqa: S102
            exec(compile(cell.source, f"{path}:{grade_id}", "exec"), namespace)  # noqa: S102
            return namespace
        if cell.cell_type == "code":  # IPython syntax (%timeit) becomes Python first
            imports += [node for node in ast.parse(_as_python(cell.source)).body
                        if isinstance(node, (ast.Import, ast.ImportFrom))]
    raise LookupError(f"solutions/{lesson} has no cell {grade_id!r}")


def _as_python(source: str) -> str:
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def solution(lesson: str, grade_id: str, name: str | None = None):
    """The object the solution cell ``grade_id`` defines as ``name`` (default: grade_id)."""
    return _namespace(lesson, grade_id)[name or grade_id]
