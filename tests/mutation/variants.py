"""Variants of a model answer: one operator's edit at one node of the learner's part.

Variants are deterministic: nodes in a fixed order, an id from the exercise, the operator
and a hash of the variant's text, so the equivalents file and the baseline stay stable.
"""
from __future__ import annotations

import ast
import copy
import hashlib
from dataclasses import dataclass

from .exercises import Exercise
from .generic import GENERIC
from .learner import LEARNER
from .operators import Env, Operator, construct_names, walk

OPERATORS: tuple[Operator, ...] = GENERIC + LEARNER


@dataclass(frozen=True)
class Variant:
    id: str  # "lesson03/crossover:swap-operator:1a2b3c4d"
    exercise: str
    operator: str
    kind: str  # "generic" or "learner"
    mistake: str
    detail: str  # "line 5: `a < b` → `a > b`"
    keywords: tuple[str, ...]
    source: str


def _in_regions(node: ast.AST, regions: list[tuple[int, int]]) -> bool:
    start, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    return start is not None and any(low < start and end < high for low, high in regions)


def _env(exercise: Exercise, tree: ast.Module) -> Env:
    bound = set()
    for node in ast.walk(ast.parse(exercise.imports)) if exercise.imports else ():
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    for node in tree.body:  # a script's own imports
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return Env(frozenset(bound))


def original(exercise: Exercise) -> str:
    """The model answer as the variants are written: unparsed, without comments."""
    return ast.unparse(ast.parse(exercise.source))


def variants(exercise: Exercise, operators: tuple[Operator, ...] = OPERATORS) -> list[Variant]:
    """Every variant of the exercise's model answer, one per (operator, node, edit), sorted by
    id; a variant whose text equals another of its class, or the original, is left out."""
    tree = ast.parse(exercise.source)
    env, regions, unchanged = _env(exercise, tree), exercise.regions(), original(exercise)
    nodes = [(node, place) for node, place in walk(tree) if _in_regions(node, regions)]
    positions = {id(node): index for index, (node, _) in enumerate(walk(tree))}
    found: dict[tuple[str, str], Variant] = {}
    for operator in operators:
        for node, place in nodes:
            for edit in operator.edits(node, place, env):
                source = _apply(tree, positions[id(node)], edit)
                if source is None or source == unchanged or (operator.kind, source) in found:
                    continue
                words = operator.keywords + tuple(w for w in edit.keywords if len(w) >= 3) + (
                    construct_names(node, place) if operator.construct else ())
                digest = hashlib.sha1(source.encode()).hexdigest()[:8]
                found[operator.kind, source] = Variant(
                    f"{exercise.key}:{operator.name}:{digest}", exercise.key, operator.name,
                    operator.kind, operator.mistake, f"line {node.lineno}: {edit.detail}",
                    tuple(dict.fromkeys(words)), source)
    return sorted(found.values(), key=lambda variant: variant.id)


def _apply(tree: ast.Module, position: int, edit) -> str | None:
    mutant = copy.deepcopy(tree)
    node, place = list(walk(mutant))[position]
    edit.apply(node, place)
    try:
        source = ast.unparse(ast.fix_missing_locations(mutant))
        compile(source, "<variant>", "exec")
    except (SyntaxError, ValueError, TypeError, AttributeError):
        return None
    return source
