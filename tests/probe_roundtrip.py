"""Helpers for testing checks: run probes as the grader does; expect passes and failures."""
from __future__ import annotations

import json

import pytest

from course_utils.checks import Check, CheckFailure
from course_utils.checks._core import run_probe
from course_utils.grading.worker import probe_expression


def probe_as_grader(check: Check, answers: tuple, inputs) -> object:
    """Evaluate the grader's probe expression where the answers are the only names."""
    names = tuple(f"answer_{index}" for index in range(len(answers)))
    text = eval(probe_expression(check.name, names, inputs), dict(zip(names, answers)))  # noqa: S307
    return json.loads(text)


def probe_in_process(check: Check, answers: tuple, inputs) -> object:
    """The probe as a notebook's check cell runs it, through a JSON round trip."""
    return json.loads(json.dumps(run_probe(check.probe, answers, inputs)))


def both_ways(check: Check, answers: tuple, seed: int, hidden: bool):
    """(inputs, observations as graded, observations in-process)."""
    inputs = json.loads(json.dumps(check.make_inputs(seed, hidden)))
    return inputs, probe_as_grader(check, answers, inputs), probe_in_process(check, answers, inputs)


def verdict(check: Check, inputs, observations) -> str:
    """'pass', or the failure message verify gives."""
    try:
        check.verify(inputs, observations)
    except CheckFailure as failure:
        return str(failure)
    return "pass"


HIDDEN_SEEDS = [0, 1, 7, 42]


def passes(check: Check, *answers) -> None:
    """The answer passes the visible check and the hidden one for several seeds."""
    check(*answers)
    for seed in HIDDEN_SEEDS:
        check(*answers, hidden=True, seed=seed)


def failure(check: Check, *answers, hidden: bool = False, seed: int | None = None) -> str:
    """The message of the CheckFailure the answer must cause."""
    with pytest.raises(CheckFailure) as raised:
        check(*answers, hidden=hidden, seed=seed)
    return str(raised.value)
