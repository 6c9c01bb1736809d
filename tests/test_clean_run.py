"""Answers probed again alone, in a fresh process, on their source (grading/check_api.py,
checks/clean_run.py, probe.portable_answers).

What travels (functions, the notebook's helpers and classes, constants, plain data), the order
of the grader's calls (alone first, the kernel only when the answer fell short there) and when
the instructor is told. End to end: lesson 08's compile_ready decides on the graph breaks
``torch._dynamo.explain`` finds; a notebook that patches ``explain`` before the check, spelled so
that no reading of its source sees it, hid a break and took the points (issue 28: 4/4 against
2); graded, the breaks are found again in a process the notebook never touched, and flagged.
"""
from __future__ import annotations

import json
import linecache
from pathlib import Path

import nbformat
import pytest
import torch

from course_utils.checks import REGISTRY, clean_run
from course_utils.checks.lesson08 import compile_ready
from course_utils.grading.check_api import run_check
from course_utils.grading.records import Limits
from course_utils.grading.request import GradeRequest
from course_utils.grading.runner import grade
from course_utils.grading.testcells import CheckCall
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

NAMES, SIZES, PAIR = ["cat", "dog"], {"cat": 4}, (1, 2)
device, DTYPE = torch.device("cpu"), torch.bfloat16


def labelled(index):
    return NAMES[index], SIZES.get(NAMES[index]), PAIR


def placed(x):
    return x.to(device, DTYPE)


class Batches:
    """A notebook class: its methods read a module, a constant and a helper function."""

    size = LIMIT

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for start in range(0, self.n, LIMIT):
            yield largest_of(torch.arange(start, min(start + LIMIT, self.n)))
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


def test_a_notebook_class_and_plain_data_travel_too(notebook_namespace):
    """A class is read from its cell's source (Python 3.11's inspect cannot find it in
    ``__main__``), with what its statement reads; a dict of flags travels as its value."""
    portable = portable_answers(notebook_namespace["Batches"], {"a": True, "b": [1, 2]})
    assert portable["names"] == ["Batches", "_answer_1"]
    assert portable["missing"] == []
    assert portable["sources"][-1].startswith("class Batches:")
    assert portable["constants"] == {"LIMIT": 10, "_answer_1": {"a": True, "b": [1, 2]}}
    rebuilt = clean_run._rebuild(portable)
    assert [int(x) for x in rebuilt["Batches"](25)] == [9, 19, 24]
    assert portable_answers((1, 2))["missing"] and portable_answers(torch.ones(2))["missing"]
    labels = portable_answers(notebook_namespace["labelled"])
    assert labels["constants"] == {"NAMES": ["cat", "dog"], "SIZES": {"cat": 4}}
    assert labels["missing"] == ["PAIR"]  # a tuple would come back as a list
    placed = portable_answers(notebook_namespace["placed"])  # as the lessons write it
    assert placed["devices"] == {"device": "cpu"} and placed["missing"] == []
    assert placed["objects"]["DTYPE"] == ["torch", "bfloat16"]
    moved = clean_run._rebuild(placed)["placed"](torch.ones(2))
    assert moved.dtype == torch.bfloat16 and moved.device.type == "cpu"


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


class Kernel:
    """The learner's kernel as run_check sees it: the answers as source, or the probe's
    observations, as JSON text (a repr); what it was asked is kept."""

    def __init__(self, observed, portable):
        self.observed, self.portable, self.asked = observed, portable, []

    def evaluate(self, expression):
        self.asked.append("portable" if "portable_of" in expression else "probe")
        return repr(json.dumps(self.portable if self.asked[-1] == "portable" else self.observed))


class Lent:
    """The grader's side (outside.OutsideSandbox): the fresh process's reply, given."""

    def __init__(self, reply=None, why="", decides=True):
        self.reply, self.why, self.decides = reply, why, decides
        self.asked, self.review = 0, []

    def observe_alone(self, check, portable, inputs):
        self.asked += 1
        return self.reply, self.why

    def note_review(self, reason):
        self.review.append(reason)


FIT = "check_fit_comm_model"
SENT = {"names": ["fit_comm_model"], "sources": ["def fit_comm_model(s, t): ..."],
        "modules": {}, "objects": {}, "constants": {}, "missing": []}


def fitted(seed, swapped=False, hidden=True):
    """What fit_comm_model's probe reports for the least-squares pair (or the pair swapped)."""
    from course_utils.checks.lesson09.fit_comm_model import least_squares
    from course_utils.probe import describe

    inputs = REGISTRY[FIT].make_inputs(seed, hidden)
    pair = least_squares(inputs["sizes"], inputs["seconds"])
    return {"returned": describe(pair[::-1] if swapped else pair), "error": None}


def grade_one(kernel, lent, seed=5, hidden=True):
    return run_check(kernel, CheckCall(FIT, ("fit_comm_model",), hidden=hidden), seed, lent)


def test_full_marks_alone_end_the_call_without_the_kernels_probe():
    kernel, lent = Kernel(fitted(5, swapped=True), SENT), Lent(fitted(5))
    assert grade_one(kernel, lent).fraction == 1
    assert kernel.asked == ["portable"] and lent.review == []


def test_less_alone_than_in_the_kernel_is_graded_alone_and_flagged():
    kernel, lent = Kernel(fitted(5), SENT), Lent(fitted(5, swapped=True))
    assert grade_one(kernel, lent).fraction == 0
    assert kernel.asked == ["portable", "probe"]
    assert lent.review == [("fit_comm_model: its answer passed 100% of the checks in its "
                            "notebook and 0% run alone in a fresh process (graded so): something "
                            "in the notebook changed what the check saw")]


def test_wrong_both_ways_is_not_flagged():
    kernel, lent = Kernel(fitted(5, swapped=True), SENT), Lent(fitted(5, swapped=True))
    verdict = grade_one(kernel, lent)
    assert verdict.fraction == 0 and "swapped" in verdict.message and lent.review == []


def test_an_answer_that_cannot_be_sent_is_graded_in_the_kernel_unflagged():
    kernel = Kernel(fitted(5), dict(SENT, missing=["WEIGHTS"]))
    lent = Lent(fitted(5, swapped=True))
    assert grade_one(kernel, lent).fraction == 1
    assert lent.asked == 0 and lent.review == []


def test_an_answer_that_fails_alone_keeps_the_kernels_points_flagged():
    crashed = {"probe_error": {"type": "NameError", "message": "name 'DATA' is not defined"}}
    for reply, why in ((crashed, ""), (None, "it ran past its time limit")):
        kernel, lent = Kernel(fitted(5), SENT), Lent(reply, why)
        assert grade_one(kernel, lent).fraction == 1
        assert len(lent.review) == 1 and "did not run alone" in lent.review[0]
        assert ("NameError" if reply else "time limit") in lent.review[0]


def test_a_visible_call_beside_hidden_ones_is_judged_alone_only_unflagged():
    """Its message is feedback, no points hang on it: the kernel's probe is not run for it."""
    kernel = Kernel(fitted(0, hidden=False), SENT)
    lent = Lent(fitted(0, swapped=True, hidden=False), decides=False)
    assert grade_one(kernel, lent, seed=0, hidden=False).fraction == 0
    assert kernel.asked == ["portable"] and lent.review == []
    kernel, lent = Kernel(fitted(0, hidden=False), SENT), Lent(None, "no time", decides=False)
    assert grade_one(kernel, lent, seed=0, hidden=False).fraction == 1
    assert kernel.asked == ["portable", "probe"] and lent.review == []


# The patch spelled so that reading the notebook's source finds nothing (review.py would name
# `torch._dynamo.explain = ...`): only running the answer alone shows it.
HIDING = '''import types
dynamo = __import__("torch._dynamo", fromlist=["explain"])
setattr(dynamo, "expl" + "ain",
        lambda fn: (lambda *a, **k: types.SimpleNamespace(break_reasons=[])))
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
    # and the instructor is told that the notebook and the fresh process disagreed
    assert row.review.startswith("compile_ready: its answer passed 100% of the checks in its "
                                 "notebook and 50% run alone"), row.review
    assert "patches" not in row.review  # the source alone did not show it
    feedback = (tmp_path / "out" / "feedback" / "hides-breaks" / f"{LESSON}.html").read_text()
    assert "graph break" in feedback
