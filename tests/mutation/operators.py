"""Mutation operators: small typed records, each naming the mistake it models.

An operator looks at one node of a model answer's syntax tree (with its place in the tree)
and proposes edits; each edit yields one variant. ``keywords`` are the words that count as
"named" when a check's message contains one: for a generic operator, also the names in the
changed statement (its construct), which :func:`construct_names` collects.
"""
from __future__ import annotations

import ast
import copy
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

Apply = Callable[[ast.AST, "Place"], None]  # edits the copy's node, in place


@dataclass(frozen=True)
class Place:
    """Where a node sits: its parent, the parent's field, the index in it (lists)."""

    parent: ast.AST | None
    field: str
    index: int | None
    ancestors: tuple[ast.AST, ...] = ()


@dataclass(frozen=True)
class Edit:
    detail: str  # what changed, for the report: "`a < b` → `a > b`"
    apply: Apply
    keywords: tuple[str, ...] = ()  # words naming this change, beyond the operator's own


@dataclass(frozen=True)
class Env:
    """What operators may know about the answer: the names its imports bind."""

    modules: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Operator:
    name: str
    kind: str  # "generic" or "learner"
    mistake: str  # the mistake it models, in a learner's terms
    edits: Callable[[ast.AST, Place, Env], Iterable[Edit]]
    keywords: tuple[str, ...] = ()
    construct: bool = field(default=False)  # the changed statement's names count as named


# ---------------------------------------------------------------- tree plumbing

def walk(node: ast.AST, place: Place | None = None) -> Iterator[tuple[ast.AST, Place]]:
    """Every node with its place, depth first, in a fixed order."""
    place = place or Place(None, "", None)
    yield node, place
    inner = (*place.ancestors, node)
    for name, value in ast.iter_fields(node):
        if isinstance(value, list):
            for index, child in enumerate(value):
                if isinstance(child, ast.AST):
                    yield from walk(child, Place(node, name, index, inner))
        elif isinstance(value, ast.AST):
            yield from walk(value, Place(node, name, None, inner))


def put(place: Place, new: ast.AST | list[ast.stmt]) -> None:
    """Put ``new`` (a node, or statements for a statement) where the node at ``place`` was."""
    if place.index is None:
        setattr(place.parent, place.field, new)
        return
    body = getattr(place.parent, place.field)
    body[place.index:place.index + 1] = new if isinstance(new, list) else [new]
    if not body and place.field in ("body", "orelse", "finalbody", "handlers"):
        body.append(ast.Pass())


def replace_with(build: Callable[[ast.AST], ast.AST | list[ast.stmt]]) -> Apply:
    return lambda node, place: put(place, build(node))


def show(node: ast.AST | list[ast.stmt] | None, width: int = 70) -> str:
    if node is None or node == []:
        return "nothing"
    text = "; ".join(ast.unparse(n) for n in node) if isinstance(node, list) else \
        ast.unparse(node)
    text = " ".join(text.split())
    return f"`{text[:width - 1]}…`" if len(text) > width else f"`{text}`"


def changed(before: ast.AST, build: Callable[[ast.AST], ast.AST | list], *,
            keywords: tuple[str, ...] = ()) -> Edit:
    """An edit replacing the node by ``build(node)``, described as before → after."""
    after = build(copy.deepcopy(before))
    return Edit(f"{show(before)} → {show(after)}", replace_with(build), keywords)


def call_name(node: ast.AST) -> str | None:
    """'to' for x.to(...), 'len' for len(...); None for anything but a call."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def calls_in(node: ast.AST) -> set[str]:
    return {name for sub in ast.walk(node) if (name := call_name(sub))}


def names_in(node: ast.AST) -> set[str]:
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
        elif isinstance(sub, ast.arg):
            found.add(sub.arg)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and \
                sub.value.isidentifier():
            found.add(sub.value)
    return found


IGNORED_NAMES = {"self", "torch", "None", "True", "False", "obj", "item", "key", "value"}


def header(statement: ast.AST) -> list[ast.AST]:
    """The parts of a statement that are its own: a loop's target and iterable, a test."""
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        return [statement.target, statement.iter]
    if isinstance(statement, (ast.If, ast.While)):
        return [statement.test]
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return list(statement.items)
    if isinstance(statement, ast.Try):
        return [handler.type for handler in statement.handlers if handler.type]
    if isinstance(statement, (ast.FunctionDef, ast.ClassDef)):
        return []
    return [statement]


def construct_names(node: ast.AST, place: Place) -> tuple[str, ...]:
    """The names of the construct a change touched: its enclosing statement's own names,
    and the enclosing function's when an answer has several."""
    statement = node if isinstance(node, ast.stmt) else next(
        (a for a in reversed(place.ancestors) if isinstance(a, ast.stmt)), node)
    names = set().union(*(names_in(part) for part in header(statement))) if header(
        statement) else set()
    names |= {STATEMENT_WORDS[type(statement)]} if type(statement) in STATEMENT_WORDS else set()
    if isinstance(statement, ast.Raise) and statement.exc is None:
        names.add("re-raise")  # a bare raise re-raises: "raise" alone would name anything
    if node is statement and not isinstance(statement, (ast.FunctionDef, ast.ClassDef)):
        # the whole compound statement changed (deleted): what its body assigns is changed too
        names |= _assigned_in(getattr(statement, "body", []))
    keys = _dict_keys(node, place)
    names |= keys
    functions = [a for a in place.ancestors if isinstance(a, ast.FunctionDef)]
    if functions and any(isinstance(a, ast.ClassDef) for a in place.ancestors):
        names.add(functions[-1].name.strip("_"))
    # short names count where they cannot be a stray word: a dict's key, a function called
    keys |= {sub.func.id for part in header(statement) for sub in ast.walk(part)
             if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name)}
    return tuple(sorted(n for n in names if (len(n) >= 3 or n in keys) and n not in IGNORED_NAMES))


def _assigned_in(body: list[ast.stmt]) -> set[str]:
    """The plain names the statements assign (targets of =, +=, annotated =, for)."""
    targets = [target for statement in body for sub in ast.walk(statement)
               for target in (sub.targets if isinstance(sub, ast.Assign) else
                              [sub.target] if isinstance(sub, (ast.AugAssign, ast.AnnAssign,
                                                                ast.For)) else [])]
    return {sub.id for target in targets for sub in ast.walk(target) if isinstance(sub, ast.Name)}


# A statement's own word, for statements whose names alone may not tell them. `raise` gets
# none: "raise" is in nearly every message about an exception, so it would name anything (a
# bare `raise` is named "re-raise", in construct_names).
STATEMENT_WORDS = {ast.Return: "return", ast.For: "loop", ast.While: "loop",
                   ast.Try: "except"}


def _dict_keys(node: ast.AST, place: Place) -> set[str]:
    """The key of the dict entry a change sits in: an entry is named by its key."""
    chain = [*place.ancestors, node]
    for parent, child in itertools.pairwise(chain):
        if isinstance(parent, ast.Dict) and child in parent.values:
            key = parent.keys[parent.values.index(child)]
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                return {key.value}
    return set()


def expression_in_load(place: Place) -> bool:
    """A node that is read as a value (not a target, not a statement)."""
    return place.field not in ("targets", "target") and not isinstance(place.parent, ast.Expr)
