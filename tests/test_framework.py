"""The check framework's own rules: verdicts, cases and how a test cell's points are earned."""
from __future__ import annotations

import pytest

from course_utils.checks.framework import (
    CaseResult,
    Check,
    CheckFailure,
    Verdict,
    case,
    expect_no_error,
    fail,
    score_fraction,
)


def verdict(*passed: bool, weights=None) -> Verdict:
    weights = weights or [1.0] * len(passed)
    return Verdict(tuple(CaseResult(f"case {i}", w, ok) for i, (ok, w)
                         in enumerate(zip(passed, weights, strict=True))))


def test_the_hidden_calls_decide_the_score_when_there_are_any():
    visible_only_right = [(False, verdict(True)), (True, verdict(False))]
    assert score_fraction(visible_only_right) == 0  # hard-coded visible answers earn nothing
    assert score_fraction([(False, verdict(False)), (True, verdict(True))]) == 1
    assert score_fraction([(False, verdict(True, False))]) == 0.5  # no hidden part


def test_cases_count_by_weight_across_the_deciding_calls():
    calls = [(True, verdict(True, False, weights=[2, 1])), (True, verdict(False))]
    assert score_fraction(calls) == pytest.approx(2 / 4)


def _check(verify) -> Check:
    return Check("check_example", lambda seed, hidden: {}, lambda answer, inputs: {}, verify,
                 "example passes.")


def test_a_failure_outside_cases_fails_the_whole_check_inside_only_its_case():
    def verify(inputs, observations, hidden):
        for name in ("a", "b", "c"):
            with case(f"case {name}", weight=2 if name == "a" else 1):
                if name != "b":
                    fail(f"{name} is wrong.", f"fix {name}.")

    result = _check(verify).evaluate({}, {}, False)
    assert [r.passed for r in result.cases] == [False, True, False]
    assert result.fraction == 1 / 4
    assert result.message.startswith("✘ case a: a is wrong.\nHow to fix it: fix a.")
    assert result.message.endswith("✔ passed: case b")

    def verify_outside(inputs, observations, hidden):
        fail("everything is wrong.", "start again.")

    whole = _check(verify_outside).evaluate({}, {}, False)
    assert whole.fraction == 0
    assert whole.message == "everything is wrong.\nHow to fix it: start again."


def test_malformed_observations_fail_closed_with_a_message():
    def verify(inputs, observations, hidden):
        return observations["missing"]

    result = _check(verify).evaluate({}, {}, False)
    assert result.fraction == 0 and "could not be checked" in result.message


def test_a_name_error_in_the_learners_function_says_it_assigns_the_name_nowhere():
    """From the error's facts: the name, the line, and the function's own arguments."""
    from course_utils.probe import describe_error

    def fit(sizes, seconds):
        return x - sizes  # noqa: F821 - the learner's deleted assignment

    try:
        fit([1], [2])
    except NameError as raised:
        error = describe_error(raised)
    with pytest.raises(CheckFailure) as failed:
        expect_no_error(error, "fit()")
    assert "raised NameError: name 'x' is not defined at line " in str(failed.value)
    assert " of fit: `return x - sizes  # noqa: F821" in str(failed.value)
    assert "; fit() assigns `x` nowhere, and its arguments are `sizes` and `seconds`." \
           in str(failed.value)


def test_errors_are_classified_by_class_not_message_text():
    error = {"type": "UnboundLocalError", "kinds": ["UnboundLocalError", "NameError", "Exception"],
             "message": "wording that changes between versions", "attribute": None,
             "line": {"lineno": 3, "text": "return device", "function": "f"}, "raised_in": None}
    with pytest.raises(CheckFailure) as raised:
        expect_no_error(error, "f()", hints={"NameError": "assign it on every path."})
    assert str(raised.value).endswith("at line 3 of f: `return device`.\n"
                                      "How to fix it: assign it on every path.")
    stub = dict(error, type="NotImplementedError", kinds=["NotImplementedError"])
    with pytest.raises(CheckFailure, match="not implemented yet"):
        expect_no_error(stub, "f()")
    from_torch = dict(stub, raised_in="torch/_tensor.py")  # not the learner's stub
    with pytest.raises(CheckFailure, match="raised NotImplementedError"):
        expect_no_error(from_torch, "f()")


def _toy_probe(answer, inputs):
    return {"answer": answer()}


def test_a_learner_global_named_exec_does_not_run_the_probe():
    """Checks the probe expression takes `exec` from the builtins: a global of that name in
    the learner's namespace (where the grader evaluates it) once ran instead, and forged the
    result; issue 28's wrong time_fn scored 3/3 that way."""
    import json

    toy = Check("check_toy", lambda seed, hidden: {}, _toy_probe, lambda *args: None, "toy")

    def forged_exec(program, ns):
        ns["result"] = json.dumps({"answer": "forged"})
    learner_namespace = {"my_answer": lambda: "wrong", "exec": forged_exec}
    text = eval(toy.probe_expression(("my_answer",), {}), learner_namespace)
    assert json.loads(text) == {"answer": "wrong"}
