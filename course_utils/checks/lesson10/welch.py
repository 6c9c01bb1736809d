"""Welch's t statistics on the trusted side: the references of lesson 10's statistics checks."""
from __future__ import annotations

import math
import statistics


def welch(first: list[float], second: list[float]) -> tuple[float, float, float]:
    """(mean difference first - second, its standard error, Welch-Satterthwaite degrees)."""
    va, vb = statistics.variance(first) / len(first), statistics.variance(second) / len(second)
    difference = statistics.fmean(first) - statistics.fmean(second)
    freedom = (va + vb) ** 2 / (va**2 / (len(first) - 1) + vb**2 / (len(second) - 1))
    return difference, math.sqrt(va + vb), freedom


def pooled(first: list[float], second: list[float]) -> tuple[float, float, float]:
    """The same by Student's pooled variance (the mistake to tell apart)."""
    na, nb = len(first), len(second)
    pooled_var = ((na - 1) * statistics.variance(first) + (nb - 1) * statistics.variance(second)
                  ) / (na + nb - 2)
    difference = statistics.fmean(first) - statistics.fmean(second)
    return difference, math.sqrt(pooled_var * (1 / na + 1 / nb)), na + nb - 2


def one_sided_p(first: list[float], second: list[float], *, equal_var: bool = False) -> float:
    """P-value of the one-sided test 'the mean of first is greater than that of second'."""
    from scipy import stats

    difference, error, freedom = (pooled if equal_var else welch)(first, second)
    return float(stats.t.sf(difference / error, freedom))


def log_interval(before: list[float], after: list[float], confidence: float, *,
                 equal_var: bool = False, normal: bool = False) -> tuple[float, float, float]:
    """(speedup, low, high): geometric-mean ratio and the t interval of the mean logs."""
    from scipy import stats

    difference, error, freedom = (pooled if equal_var else welch)(
        [math.log(x) for x in before], [math.log(x) for x in after])
    quantile = (stats.norm.ppf((1 + confidence) / 2) if normal
                else stats.t.ppf((1 + confidence) / 2, freedom))
    return (math.exp(difference), math.exp(difference - quantile * error),
            math.exp(difference + quantile * error))
