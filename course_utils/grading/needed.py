"""The cells grading runs of a submitted notebook (:class:`Plan`): what the graded cells need.

A lesson's measurement, plotting and benchmark cells are most of a submission's time, and no
check reads what they compute. From each cell's facts (dependencies.py) a cell runs when it is

* an answer (nbgrader ``solution``) cell, or **a cell the student wrote or changed**: only the
  lesson's own cells, unchanged (``LessonNotebook.lesson_cells``), may be skipped, so anything
  a student adds runs as nbgrader would run it;
* opaque: then every cell before it runs too;
* a setting changed before the last graded cell: it changes what the answers do when the
  checks call them;
* a seed or a file written before a kept cell that runs more than definitions: a check draws
  its own inputs, so only such code can see them;
* a definer of a name a kept cell reads: walking back from the read, every cell that defines
  the name runs, up to one that binds it unconditionally. A test cell reads its checks'
  answer names; what a function body reads is looked up where the checks call it, after the
  last graded cell.

Every other code cell is skipped. Where this is wrong, the fallback (execution.py,
``needs_full_run``) grades the notebook again with every cell.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .dependencies import CellFacts, analyse_cell
from .structure import LessonNotebook

if TYPE_CHECKING:
    from nbformat import NotebookNode


SKIPPED_OUTPUT = {"output_type": "stream", "name": "stdout",
                  "text": "not executed during grading: no graded cell needs it\n"}


# The lessons' notebooks hold 7 to 30 kB of code each; a submission with far more is read no
# further (every cell runs): parsing megabytes in the grading worker is time and memory.
MAX_ANALYSED_CHARS = 500_000


@dataclass(frozen=True)
class Plan:
    """Which code cells (indices into the notebook's cells) grading runs."""

    run: frozenset[int]
    skipped: frozenset[int]
    skipped_names: frozenset[str] = frozenset()  # names the skipped cells define


# ---------------------------------------------------------------------- the whole notebook
def plan_cells(nb: NotebookNode, spec: LessonNotebook) -> Plan:
    """The code cells grading runs, and those it skips, for a submitted notebook (all of
    them where its code is larger than any lesson's: no time spent reading it)."""
    code = [index for index, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    if sum(len(nb.cells[index].source) for index in code) > MAX_ANALYSED_CHARS:
        return Plan(frozenset(code), frozenset())
    tests = {item.grade_id: item for item in spec.items if item.auto}
    answers = set(spec.solution_cells)
    imported: dict[str, str] = {}
    facts: dict[int, CellFacts] = {}
    roots: dict[int, set[str]] = {}  # kept cell -> names it needs (a test cell: its answers)
    for index, cell in enumerate(nb.cells):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.cell_type != "code":
            continue
        if grade_id in tests:
            roots[index] = {name for call in tests[grade_id].calls for name in call.answer_names}
            continue
        if not cell.source.strip():
            continue
        facts[index] = analyse_cell(cell.source, imported)
        if grade_id in answers or cell.source.strip() not in spec.lesson_cells:
            roots[index] = set()  # an answer, or a cell the student wrote or changed
    last_root = max(roots, default=-1)
    for index, cell_facts in facts.items():
        if cell_facts.opaque or (cell_facts.settings and index < last_root):
            roots.setdefault(index, set())
    keep = _needed(facts, roots, last_root)
    while seeding := [i for i in facts if i not in keep and facts[i].seeds_or_files
                      and any(j > i and facts[j].runs_code for j in keep if j in facts)]:
        keep |= _needed(facts, {**roots, **{index: set() for index in seeding}}, last_root)
    skipped = set(facts) - keep
    return Plan(frozenset(keep & set(facts)), frozenset(skipped),
                frozenset(name for index in skipped for name in facts[index].defines))


def _needed(facts: dict[int, CellFacts], roots: dict[int, set[str]], last_root: int) -> set[int]:
    """The roots and, transitively, the cells that define what they read."""
    keep: set[int] = set()
    todo: list[tuple[int, int | None, set[str]]] = [(i, i, names) for i, names in roots.items()]
    while todo:
        index, position, names = todo.pop()
        if index not in keep:
            keep.add(index)
            if index in facts:
                cell = facts[index]
                if cell.opaque:  # it may read anything defined before it
                    todo += [(i, None, set()) for i in facts if i < index]
                todo.append((index, index, cell.uses))
                todo.append((index, last_root + 1, cell.deferred))
        if position is None:
            continue
        for name in names:
            todo += [(i, None, set()) for i in _definers(facts, name, position)]
    return keep


def _definers(facts: dict[int, CellFacts], name: str, before: int) -> list[int]:
    """Cells before ``before`` whose definitions of ``name`` a read there may see."""
    found = []
    for index in sorted((i for i in facts if i < before), reverse=True):
        cell = facts[index]
        if cell.opaque or name in cell.defines:
            found.append(index)
        if name in cell.rebinds:
            break
    return found
