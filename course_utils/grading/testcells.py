"""Read a test cell as data: which registered checks it calls, with which answers."""
from __future__ import annotations

import ast
from dataclasses import dataclass


class InvalidTestCell(ValueError):
    """A test cell that is not a docstring followed by check calls."""


@dataclass(frozen=True)
class CheckCall:
    """One ``checks.<name>(<answer names>, hidden=...)`` statement."""

    check_name: str
    answer_names: tuple[str, ...]
    hidden: bool


def _strip_markers(source: str) -> str:
    # nbgrader's hidden-test markers are comments already; keep them out of the AST anyway.
    return "\n".join(line for line in source.splitlines()
                     if line.strip() not in ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"))


def parse_test_cell(source: str) -> tuple[str, list[CheckCall]]:
    """Return (docstring, check calls) of a test cell, or raise InvalidTestCell."""
    try:
        tree = ast.parse(_strip_markers(source))
    except SyntaxError as error:
        raise InvalidTestCell(f"the test cell is not valid Python: {error}") from None
    body = list(tree.body)
    if not body or not (isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                        and isinstance(body[0].value.value, str)):
        raise InvalidTestCell(
            "a test cell must start with a one-line docstring saying what it checks")
    docstring = body.pop(0).value.value.strip()
    calls = []
    for statement in body:
        call = statement.value if isinstance(statement, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name) and call.func.value.id == "checks"):
            raise InvalidTestCell(
                f"line {statement.lineno}: a test cell may only call checks.<name>(...); "
                f"found {ast.unparse(statement)!r}")
        if not all(isinstance(arg, ast.Name) for arg in call.args):
            raise InvalidTestCell(f"line {statement.lineno}: pass the learner's answers by name")
        hidden = False
        for keyword in call.keywords:
            if keyword.arg != "hidden" or not isinstance(keyword.value, ast.Constant):
                raise InvalidTestCell(f"line {statement.lineno}: only hidden=True/False is allowed")
            hidden = bool(keyword.value.value)
        calls.append(CheckCall(call.func.attr, tuple(arg.id for arg in call.args), hidden))
    if not calls:
        raise InvalidTestCell("a test cell must call at least one check")
    return docstring, calls
