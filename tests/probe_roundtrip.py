"""Helpers for testing checks: run each probe in-process and as the grader sends it.

Every verdict a test asks for is computed both ways (the notebook's in-process call and the
grader's probe expression) and must agree, so a probe that is not self-contained, or that
behaves differently when sent as source, fails the test that uses it.
"""
from __future__ import annotations

import json

import pytest

from course_utils.checks import Check, CheckFailure
from course_utils.checks.framework import Verdict, run_probe

HIDDEN_SEEDS = [0, 1, 7, 42]


def probe_as_grader(check: Check, answers: tuple, inputs) -> object:
    """Evaluate the grader's probe expression where the answers are the only names."""
    names = tuple(f"answer_{index}" for index in range(len(answers)))
    text = eval(check.probe_expression(names, inputs), dict(zip(names, answers, strict=True)))
    return json.loads(text)


def graded(check: Check, answers: tuple, *, hidden: bool, seed: int) -> Verdict:
    """The verdict as the grader reaches it; it must equal the in-process one."""
    inputs = json.loads(json.dumps(check.make_inputs(seed, hidden)))
    remote = check.evaluate(inputs, probe_as_grader(check, answers, inputs), hidden)
    local = check.evaluate(inputs, run_probe(check.probe, answers, inputs), hidden)
    assert remote == local, "the probe behaves differently when the grader sends it"
    return remote


def passes(check: Check, *answers, seeds=HIDDEN_SEEDS) -> None:
    """The answer passes the visible check and the hidden one for several seeds, both ways."""
    check(*answers)
    assert graded(check, answers, hidden=False, seed=0).fraction == 1
    for seed in seeds:
        check(*answers, hidden=True, seed=seed)
        assert graded(check, answers, hidden=True, seed=seed).fraction == 1


def failure(check: Check, *answers, hidden: bool = False, seed: int | None = None) -> str:
    """The message of the CheckFailure the answer must cause (the grader must agree)."""
    with pytest.raises(CheckFailure) as raised:
        check(*answers, hidden=hidden, seed=seed)
    verdict = graded(check, answers, hidden=hidden, seed=0 if seed is None else seed)
    assert verdict.fraction < 1 and verdict.message == str(raised.value)
    return str(raised.value)
