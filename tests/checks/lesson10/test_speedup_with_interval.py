"""Tests of the check course_utils/checks/lesson10/speedup_with_interval.py."""
from __future__ import annotations

import math
import statistics

import numpy as np
from scipy import stats

from ...probe_roundtrip import failure, passes
from ...solutions import solution
from .shared import LESSON, SEEDS, check_speedup

speedup_with_interval = solution(LESSON, "speedup_with_interval")


def speedup_by_hand(before_s, after_s, confidence=0.95):
    """Right: the statistics module, the Welch-Satterthwaite degrees by hand."""
    logs_b, logs_a = [math.log(t) for t in before_s], [math.log(t) for t in after_s]
    vb, va = statistics.variance(logs_b) / len(logs_b), statistics.variance(logs_a) / len(logs_a)
    freedom = (vb + va) ** 2 / (vb**2 / (len(logs_b) - 1) + va**2 / (len(logs_a) - 1))
    difference = statistics.fmean(logs_b) - statistics.fmean(logs_a)
    half = stats.t.ppf(0.5 + confidence / 2, freedom) * math.sqrt(vb + va)
    return math.exp(difference), math.exp(difference - half), math.exp(difference + half)


def speedup_numpy(before_s, after_s, confidence=0.95):
    """Right: numpy arrays, the interval as exp of a pair, returned as a list."""
    b, a = np.log(np.asarray(before_s)), np.log(np.asarray(after_s))
    se2 = b.var(ddof=1) / b.size + a.var(ddof=1) / a.size
    df = se2**2 / ((b.var(ddof=1) / b.size) ** 2 / (b.size - 1)
                   + (a.var(ddof=1) / a.size) ** 2 / (a.size - 1))
    t = stats.t.interval(confidence, df)[1]
    centre = b.mean() - a.mean()
    return list(np.exp([centre, centre - t * np.sqrt(se2), centre + t * np.sqrt(se2)]))


def arithmetic_ratio(before_s, after_s, confidence=0.95):
    _, low, high = speedup_with_interval(before_s, after_s, confidence)
    return statistics.fmean(before_s) / statistics.fmean(after_s), low, high


def inverted(before_s, after_s, confidence=0.95):
    return speedup_with_interval(after_s, before_s, confidence)


def student(before_s, after_s, confidence=0.95):
    result = stats.ttest_ind(np.log(before_s), np.log(after_s), equal_var=True)
    low, high = result.confidence_interval(confidence)
    return (math.exp(np.mean(np.log(before_s)) - np.mean(np.log(after_s))), math.exp(low),
            math.exp(high))


def not_exponentiated(before_s, after_s, confidence=0.95):
    speedup, low, high = speedup_with_interval(before_s, after_s, confidence)
    return speedup, math.log(low), math.log(high)


def fixed_level(before_s, after_s, confidence=0.95):
    return speedup_with_interval(before_s, after_s)


def test_the_solution_and_right_alternatives_pass():
    for answer in (speedup_with_interval, speedup_by_hand, speedup_numpy):
        passes(check_speedup, answer, seeds=SEEDS)


def test_each_mistake_is_named():
    assert "upside down" in failure(check_speedup, inverted)
    assert "arithmetic means" in failure(check_speedup, arithmetic_ratio)
    assert "Student's pooled" in failure(check_speedup, student)
    assert "not exponentiated" in failure(check_speedup, not_exponentiated)
    assert "ignores the confidence" in failure(check_speedup, fixed_level, hidden=True, seed=0)
    assert "expected about" not in failure(check_speedup, student, hidden=True, seed=0)


def test_a_stub_and_a_wrong_type_are_named():
    def stub(before_s, after_s, confidence=0.95):
        raise NotImplementedError

    assert "not implemented" in failure(check_speedup, stub).lower()
    assert "three numbers" in failure(check_speedup, lambda b, a, confidence=0.95: 1.0)
