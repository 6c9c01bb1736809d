"""Right alternatives: imported from tests/checks/lesson10/test_verdict.py, and own."""
from __future__ import annotations

import math

import numpy as np
import torch
from scipy import stats

from ...checks.lesson10.test_verdict import verdict_from_statistic, verdict_reversed_sides


def verdict_halved_two_sided(before_s, after_s, alpha=0.05):
    """Own: the two-sided p-value halved, on the side of a lower mean after."""
    result = stats.ttest_ind([math.log(x) for x in before_s], [math.log(x) for x in after_s],
                             equal_var=False)
    one_sided = result.pvalue / 2 if result.statistic > 0 else 1 - result.pvalue / 2
    return "faster" if one_sided < alpha else "not shown"


def verdict_critical_value(before_s, after_s, alpha=0.05):
    """Own: the t statistic against the critical value t_(1-alpha) at Welch's degrees."""
    b, a = np.log(np.asarray(before_s, dtype=float)), np.log(np.asarray(after_s, dtype=float))
    vb, va = b.var(ddof=1) / b.size, a.var(ddof=1) / a.size
    t = (b.mean() - a.mean()) / np.sqrt(vb + va)
    df = (vb + va) ** 2 / (vb**2 / (b.size - 1) + va**2 / (a.size - 1))
    return "faster" if t > stats.t.ppf(1 - alpha, df) else "not shown"


def verdict_from_result_object(before_s, after_s, alpha=0.05):
    """Own: the logs by torch, keyword arguments in another order, a dictionary look-up."""
    result = stats.ttest_ind(a=torch.tensor(before_s, dtype=torch.float64).log().numpy(),
                             b=torch.tensor(after_s, dtype=torch.float64).log().numpy(),
                             alternative="greater", equal_var=False)
    return {True: "faster", False: "not shown"}[bool(result.pvalue < alpha)]


ALTERNATIVES = [verdict_from_statistic, verdict_reversed_sides, verdict_halved_two_sided,
                verdict_critical_value, verdict_from_result_object]
