"""Right alternatives: imported from tests/checks/lesson09/test_fit_comm_model.py, and own."""
from __future__ import annotations

import statistics

import numpy as np

from ...checks.lesson09.test_fit_comm_model import fit_with_lstsq, fit_with_polyfit


def fit_with_statistics(sizes, seconds):
    """Own: the standard library's linear_regression."""
    slope, intercept = statistics.linear_regression(sizes, seconds)
    return intercept, 1 / slope


def fit_with_normal_equations(sizes, seconds):
    """Own: the 2 x 2 normal equations solved by hand, in Python floats."""
    n, sx, sy = len(sizes), sum(sizes), sum(seconds)
    sxx = sum(x * x for x in sizes)
    sxy = sum(x * y for x, y in zip(sizes, seconds, strict=True))
    slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    return (sy - slope * sx) / n, 1 / slope


def fit_with_numpy_lstsq(sizes, seconds):
    """Own: NumPy's lstsq, the columns [size, 1], numbers returned as NumPy floats."""
    design = np.vstack([np.asarray(sizes, dtype=float), np.ones(len(sizes))]).T
    (slope, intercept), *_ = np.linalg.lstsq(design, np.asarray(seconds), rcond=None)
    return intercept, 1.0 / slope


ALTERNATIVES = [fit_with_polyfit, fit_with_lstsq, fit_with_statistics,
                fit_with_normal_equations, fit_with_numpy_lstsq]
