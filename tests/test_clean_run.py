"""A check's probe run again in a fresh process on the answers' source (checks/clean_run.py).

Lesson 08's compile_ready decides on the graph breaks ``torch._dynamo.explain`` finds. A notebook
that patches ``explain`` before the check hid a break and took the points (issue 28: 4/4 against
2); graded, the breaks are now found again in a process the notebook never touched.
"""
from __future__ import annotations

import linecache
from pathlib import Path

import nbformat
import pytest
import torch

from course_utils.checks import REGISTRY, clean_run
from course_utils.checks.lesson08 import compile_ready
from course_utils.grading.records import Limits
from course_utils.grading.request import GradeRequest
from course_utils.grading.runner import grade
from course_utils.probe import portable_answers

ROOT = Path(__file__).resolve().parents[1]
LESSON, NOTEBOOK = "08_overhead", "overhead.ipynb"

CELL = '''
import torch
import torch.nn.functional as F
from torch import nn
LIMIT = 10

def largest_of(scores):
    return scores.abs().amax()

def score(x, weight):
    scores = x @ weight
    largest = largest_of(scores)
    return F.softmax(torch.where(largest > LIMIT, scores * (LIMIT / largest), scores), dim=-1)

def compile_for_batches(fn, backend):
    return torch.compile(fn, backend=backend, dynamic=True, fullgraph=True)

def uses_a_tensor(x, weight):
    return x @ WEIGHTS
WEIGHTS = torch.ones(5, 6)
'''


@pytest.fixture(scope="module")
def notebook_namespace():
    """CELL run as a notebook cell is: its source in linecache, its functions in __main__."""
    name = "<cell-clean-run>"
    linecache.cache[name] = (len(CELL), None, CELL.splitlines(True), name)
    namespace = {"__name__": "__main__"}
    exec(compile(CELL, name, "exec"), namespace)  # noqa: S102 - the test's own cell
    return namespace


def test_the_answers_travel_as_source_with_what_they_use(notebook_namespace):
    portable = portable_answers(notebook_namespace["score"],
                                notebook_namespace["compile_for_batches"])
    assert portable["names"] == ["score", "compile_for_batches"]
    assert portable["modules"] == {"torch": "torch", "F": "torch.nn.functional"}
    assert portable["constants"] == {"LIMIT": 10}
    assert [s.split("(")[0] for s in portable["sources"]] == [
        "def largest_of", "def score", "def compile_for_batches"]  # a helper before its caller
    assert portable["missing"] == []
    assert portable_answers(notebook_namespace["uses_a_tensor"])["missing"] == ["WEIGHTS"]


def test_rebuilt_answers_give_the_observations_the_kernel_gives(notebook_namespace):
    inputs = compile_ready.make_inputs(1, True)
    answers = (notebook_namespace["score"], notebook_namespace["compile_for_batches"])
    rebuilt = clean_run._rebuild(portable_answers(*answers))
    assert rebuilt["largest_of"] is not notebook_namespace["largest_of"]
    kernel = compile_ready.probe(*answers, inputs)
    clean = REGISTRY["check_compile_ready"].probe(rebuilt["score"],
                                                  rebuilt["compile_for_batches"], inputs)
    assert clean == kernel and clean["breaks"] == []
    torch._dynamo.reset()


def test_an_answer_that_cannot_be_rebuilt_keeps_the_kernels_observations():
    kernel = {"breaks": []}
    facts = {"kernel": kernel, "portable": {"names": ["score"], "missing": ["WEIGHTS"]}}
    assert clean_run.rerun("check_compile_ready", facts, {}, sandbox=None) is kernel


HIDING = '''import types
import torch._dynamo
torch._dynamo.explain = lambda fn: (lambda *a, **k: types.SimpleNamespace(break_reasons=[]))
'''
WITH_A_BREAK = '''def score(x, weight):
    scores = x @ weight
    largest = scores.abs().amax().item()
    if largest > 10:
        scores = scores * (10 / largest)
    return scores.softmax(dim=-1)


def compile_for_batches(fn, backend):
    return torch.compile(fn, backend=backend, dynamic=True, fullgraph=True)
'''


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_notebook_that_patches_explain_loses_the_points_graded(tmp_path, grading_sandbox):
    nb = nbformat.read(ROOT / "solutions" / LESSON / NOTEBOOK, as_version=4)
    answer = next(c for c in nb.cells
                  if c.metadata.get("nbgrader", {}).get("grade_id") == "compile_ready")
    answer.source = WITH_A_BREAK
    nb.cells.insert(nb.cells.index(answer), nbformat.v4.new_code_cell(HIDING))
    path = tmp_path / "submissions" / "hides-breaks" / LESSON / NOTEBOOK
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)
    outcome = grade(GradeRequest(ROOT, tmp_path / "submissions", tmp_path / "out", jobs=1,
                                 seed=3, limits=Limits(cell_timeout=120,
                                                       submission_timeout=500)))
    row = next(r for r in outcome.rows if r.student == "hides-breaks")
    scores = dict(row.exercises)
    # the values are right, the breaks are not: half of compile_ready's points, not all
    assert 0 < scores["test_compile_ready"] < 4, scores
    feedback = (tmp_path / "out" / "feedback" / "hides-breaks" / f"{LESSON}.html").read_text()
    assert "graph break" in feedback
