"""Tests of the check course_utils/checks/lesson09/fit_comm_model.py."""
from __future__ import annotations

import numpy as np
import torch

from course_utils import checks

from ...probe_roundtrip import failure, graded, passes
from ...solutions import solution
from .shared import LESSON

check = checks.check_fit_comm_model
fit_comm_model = solution(LESSON, "fit_comm_model")


def fit_with_polyfit(sizes, seconds):
    """Right: NumPy's polynomial fit of degree 1 (slope first)."""
    slope, intercept = np.polyfit(sizes, seconds, 1)
    return float(intercept), float(1 / slope)


def fit_with_lstsq(sizes, seconds):
    """Right: torch's least squares on the design matrix [1, size]."""
    x = torch.tensor(sizes, dtype=torch.float64)
    design = torch.stack([torch.ones_like(x), x], dim=1)
    solution_ = torch.linalg.lstsq(design, torch.tensor(seconds, dtype=torch.float64)[:, None])
    intercept, slope = solution_.solution.flatten().tolist()
    return intercept, 1 / slope


def test_the_model_answer_and_alternatives_pass():
    passes(check, fit_comm_model)
    passes(check, fit_with_polyfit)
    passes(check, fit_with_lstsq)


def test_returning_the_slope_is_named():
    def slope_as_bandwidth(sizes, seconds):
        latency, bandwidth = fit_comm_model(sizes, seconds)
        return latency, 1 / bandwidth
    assert "seconds per byte" in failure(check, slope_as_bandwidth)


def test_swapped_pair_is_named():
    def swapped(sizes, seconds):
        return tuple(reversed(fit_comm_model(sizes, seconds)))
    assert "swapped" in failure(check, swapped)


def test_a_line_through_the_origin_is_named():
    def through_origin(sizes, seconds):
        x, y = np.array(sizes, dtype=float), np.array(seconds)
        return 0.0, float((x * x).sum() / (x * y).sum())
    message = failure(check, through_origin, hidden=True, seed=1)
    assert "through the origin" in message


def test_two_points_only_lose_the_fit_case():
    def two_points(sizes, seconds):
        slope = (seconds[-1] - seconds[0]) / (sizes[-1] - sizes[0])
        return seconds[0] - slope * sizes[0], 1 / slope
    assert "least-squares line" in failure(check, two_points)
    assert graded(check, (two_points,), hidden=True, seed=1).fraction < 1


def test_not_a_pair_is_refused():
    def a_dict(sizes, seconds):
        latency, bandwidth = fit_comm_model(sizes, seconds)
        return {"latency": latency, "bandwidth": bandwidth}
    assert "not a pair of two numbers" in failure(check, a_dict)
