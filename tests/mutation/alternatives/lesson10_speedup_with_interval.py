"""Right alternatives: imported from tests/checks/lesson10/test_speedup_with_interval.py; own."""
from __future__ import annotations

import math
import statistics

import numpy as np
from scipy import stats

from ...checks.lesson10.test_speedup_with_interval import speedup_by_hand, speedup_numpy


def speedup_from_ttest_ci(before_s, after_s, confidence=0.95):
    """Own: scipy's result, its interval read as attributes, a tuple built from a generator."""
    logs = [np.log(np.asarray(t, dtype=float)) for t in (before_s, after_s)]
    interval = stats.ttest_ind(*logs, equal_var=False).confidence_interval(confidence)
    centre = logs[0].mean() - logs[1].mean()
    return tuple(float(np.exp(x)) for x in (centre, interval.low, interval.high))


def speedup_geometric_means(before_s, after_s, confidence=0.95):
    """Own: the ratio of scipy's geometric means, the interval's half-width by hand."""
    ratio = stats.gmean(before_s) / stats.gmean(after_s)
    logs_b, logs_a = np.log(before_s), np.log(after_s)
    error_b, error_a = stats.sem(logs_b) ** 2, stats.sem(logs_a) ** 2
    freedom = (error_b + error_a) ** 2 / (error_b**2 / (len(logs_b) - 1)
                                         + error_a**2 / (len(logs_a) - 1))
    half = stats.t.ppf(1 - (1 - confidence) / 2, freedom) * math.sqrt(error_b + error_a)
    return float(ratio), float(ratio * math.exp(-half)), float(ratio * math.exp(half))


def speedup_pure_python(before_s, after_s, confidence=0.95):
    """Own: the statistics module only, and scipy's t distribution object."""
    parts = []
    for sample in (before_s, after_s):
        logs = [math.log(x) for x in sample]
        parts.append((statistics.mean(logs), statistics.pvariance(logs) * len(logs)
                      / (len(logs) - 1) / len(logs), len(logs)))
    (mb, vb, nb), (ma, va, na) = parts
    df = (vb + va) ** 2 / (vb * vb / (nb - 1) + va * va / (na - 1))
    low_t, high_t = stats.t(df).interval(confidence)
    se = math.sqrt(vb + va)
    return math.exp(mb - ma), math.exp(mb - ma + low_t * se), math.exp(mb - ma + high_t * se)


ALTERNATIVES = [speedup_by_hand, speedup_numpy, speedup_from_ttest_ci, speedup_geometric_means,
                speedup_pure_python]
