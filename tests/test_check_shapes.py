"""Observations are validated against the type a check declares before verify() reads them."""
from __future__ import annotations

from typing import Any, TypedDict

import pytest

from course_utils.checks.framework import Check, GraderError, fail
from course_utils.checks.shapes import shape_problem
from course_utils.probe import ErrorFacts


class Run(TypedDict):
    value: float | None  # what came back
    error: ErrorFacts | None  # what was raised
    seen: list[str]  # devices seen


GOOD = {"value": 0.5, "error": None, "seen": ["meta"]}


@pytest.mark.parametrize("forged, says", [
    ({"value": 0.5, "error": None}, "lacks ['seen']"),
    ({**GOOD, "extra": 1}, "unknown keys ['extra']"),
    ({**GOOD, "seen": "meta"}, "observations['seen'] is str, not a list"),
    ({**GOOD, "value": True}, "observations['value']"),
    ({**GOOD, "error": {"type": "E"}}, "observations['error'] lacks"),
    ([GOOD], "not a record"),
])
def test_shape_problem_says_where_the_data_differ(forged, says):
    assert says in shape_problem(forged, Run)


def test_shape_problem_accepts_the_declared_shape_and_refuses_an_undeclarable_type():
    assert shape_problem([GOOD, {**GOOD, "value": 3}], list[Run]) is None
    assert shape_problem({"x": [1, "a"]}, dict[str, Any]) is None
    with pytest.raises(TypeError, match="not a type observations can have"):
        shape_problem(1, set)


def _check(verify) -> Check:
    return Check("check_shapes_demo", lambda seed, hidden: {}, lambda answer, inputs: GOOD,
                 verify, "ok", observes=Run)


def test_forged_data_fail_the_answer_and_a_verify_bug_is_the_graders():
    def verify(inputs, seen, hidden):
        if seen["value"] > 1:
            fail("too big.", "smaller.")
        return seen["missing"]  # a bug of the check: not a key of Run

    check = _check(verify)
    forged = check.evaluate({}, {"value": 0.5}, hidden=False)
    assert not forged.passed and "incomplete or forged" in forged.message
    assert "too big" in check.evaluate({}, {**GOOD, "value": 2.0}, hidden=False).message
    with pytest.raises(GraderError, match="KeyError"):
        check.evaluate({}, GOOD, hidden=False)


def test_the_grader_reports_a_verify_bug_as_its_own_error_not_the_learners_zero(monkeypatch):
    """check_api.run_check lets GraderError through (the notebook's status becomes `error`);
    forged data still score 0 with the reason."""
    import json

    from course_utils.checks import REGISTRY
    from course_utils.grading.check_api import run_check
    from course_utils.grading.testcells import CheckCall

    class Session:  # the kernel's answer to the probe expression: JSON text, as a repr
        def __init__(self, observations):
            self.text = repr(json.dumps(observations))

        def evaluate(self, expression):
            return self.text

    monkeypatch.setitem(REGISTRY, "check_shapes_demo",
                        _check(lambda inputs, seen, hidden: seen["missing"]))
    call = CheckCall("check_shapes_demo", ("answer",), hidden=True)
    with pytest.raises(GraderError):
        run_check(Session(GOOD), call, seed=1)
    verdict = run_check(Session({"value": 0.5}), call, seed=1)
    assert verdict.fraction == 0 and "incomplete or forged" in verdict.message
