"""Tests of the check course_utils/checks/lesson10/verdict.py."""
from __future__ import annotations

import math
import statistics

import numpy as np
from scipy import stats

from course_utils.checks.lesson10 import verdict as verdict_check

from ...probe_roundtrip import failure, passes
from ...solutions import solution
from .shared import LESSON, SEEDS, check_verdict

verdict = solution(LESSON, "verdict")


def verdict_from_statistic(before_s, after_s, alpha=0.05):
    """Right: the t statistic and Welch's degrees by hand, the p-value from stats.t.sf."""
    before_s, after_s = [math.log(x) for x in before_s], [math.log(x) for x in after_s]
    vb, va = (statistics.variance(before_s) / len(before_s),
              statistics.variance(after_s) / len(after_s))
    t = (statistics.fmean(before_s) - statistics.fmean(after_s)) / (vb + va) ** 0.5
    df = (vb + va) ** 2 / (vb**2 / (len(before_s) - 1) + va**2 / (len(after_s) - 1))
    return "faster" if stats.t.sf(t, df) < alpha else "not shown"


def verdict_reversed_sides(before_s, after_s, alpha=0.05):
    """Right: after against before, with alternative='less'."""
    p = stats.ttest_ind(np.log(after_s), np.log(before_s), equal_var=False,
                        alternative="less").pvalue
    return "not shown" if p >= alpha else "faster"


def two_sided(before_s, after_s, alpha=0.05):
    return "faster" if stats.ttest_ind(np.log(before_s), np.log(after_s), equal_var=False
                                       ).pvalue < alpha else "not shown"


def two_sided_with_direction(before_s, after_s, alpha=0.05):
    test = stats.ttest_ind(np.log(before_s), np.log(after_s), equal_var=False)
    return "faster" if test.pvalue < alpha and test.statistic > 0 else "not shown"


def student(before_s, after_s, alpha=0.05):
    p = stats.ttest_ind(np.log(before_s), np.log(after_s), alternative="greater").pvalue
    return "faster" if p < alpha else "not shown"


def raw_seconds(before_s, after_s, alpha=0.05):
    """The exercise's earlier rule: Welch's test on the seconds themselves."""
    p = stats.ttest_ind(before_s, after_s, equal_var=False, alternative="greater").pvalue
    return "faster" if p < alpha else "not shown"


def logs_of_one_list(before_s, after_s, alpha=0.05):
    p = stats.ttest_ind(np.log(before_s), after_s, equal_var=False, alternative="greater").pvalue
    return "faster" if p < alpha else "not shown"


def means_only(before_s, after_s, alpha=0.05):
    return "faster" if statistics.fmean(after_s) < statistics.fmean(before_s) else "not shown"


def fixed_alpha(before_s, after_s, alpha=0.05):
    return verdict(before_s, after_s)


def test_the_solution_and_right_alternatives_pass():
    for answer in (verdict, verdict_from_statistic, verdict_reversed_sides):
        passes(check_verdict, answer, seeds=SEEDS)


def test_each_mistake_is_named():
    assert "a two-sided test (or abs())" in failure(check_verdict, two_sided)
    assert "two-sided test doubles" in failure(check_verdict, two_sided_with_direction)
    assert "Student's test" in failure(check_verdict, student, hidden=True, seed=0)
    assert "comparing the means alone" in failure(check_verdict, means_only)
    assert "ignored alpha" in failure(check_verdict, fixed_alpha, hidden=True, seed=0)
    assert "'faster' or 'not shown'" in failure(check_verdict, lambda b, a, alpha=0.05: True)
    for seed in SEEDS:  # visible and hidden, on every seed: the raw seconds are named
        assert "tested the raw seconds" in failure(check_verdict, raw_seconds)
        assert "tested the raw seconds" in failure(check_verdict, raw_seconds, hidden=True,
                                                   seed=seed)
    assert "one list taken on the log scale" in failure(check_verdict, logs_of_one_list)


def test_every_drawn_case_is_the_kind_it_claims():
    for seed in SEEDS:
        for case in verdict_check.make_inputs(seed, hidden=True)["cases"]:
            before, after = np.log(case["before"]), np.log(case["after"])
            welch = stats.ttest_ind(before, after, equal_var=False, alternative="greater").pvalue
            pooled = stats.ttest_ind(before, after, alternative="greater").pvalue
            raw = stats.ttest_ind(case["before"], case["after"], equal_var=False,
                                  alternative="greater").pvalue
            assert verdict_check.KINDS[case["kind"]][1](welch, pooled, raw), case["kind"]
            if case["kind"] != "scale":  # elsewhere the raw seconds decide alike
                assert (welch < case["alpha"]) == (raw < case["alpha"]), case
