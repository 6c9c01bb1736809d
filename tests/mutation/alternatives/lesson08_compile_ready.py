"""Right alternatives: imported from tests/checks/lesson08/test_compile_ready.py, and own."""
from __future__ import annotations

import torch

from ...checks.lesson08.test_compile_ready import compile_as_decorator, score_clamped


def score_with_minimum(x, weight):
    """Own: the scale as a minimum of two tensors, softmax from torch.nn.functional."""
    scores = torch.matmul(x, weight)
    largest = scores.abs().max()
    scale = torch.minimum(torch.ones_like(largest), 10 / largest)
    return torch.nn.functional.softmax(scores * scale, dim=-1)


def score_with_where_on_scale(x, weight):
    """Own: torch.where picks the scale, not the scores; the last dimension by number."""
    scores = x.matmul(weight)
    largest = torch.amax(torch.abs(scores))
    scale = torch.where(largest > 10, 10 / largest, torch.ones_like(largest))
    return torch.softmax(scores * scale, dim=scores.dim() - 1)


def compile_with_partial(fn, backend):
    """Own: functools.partial of torch.compile."""
    import functools

    compiler = functools.partial(torch.compile, dynamic=True, fullgraph=True)
    return compiler(fn, backend=backend)


def compile_with_keywords(fn, backend):
    """Own: the options by keyword in another order, mode given as its default."""
    return torch.compile(fn, fullgraph=True, dynamic=True, backend=backend, mode=None)


def score_model_answer_style(x, weight):
    """Own: the model answer's torch.where written with the scaled scores computed first."""
    scores = x @ weight
    largest = scores.abs().amax()
    scaled = scores * (10 / largest)
    return torch.where(largest > 10, scaled, scores).softmax(-1)


ALTERNATIVES = [(score_clamped, compile_as_decorator), (score_with_minimum, compile_with_partial),
                (score_with_where_on_scale, compile_with_keywords),
                (score_model_answer_style, compile_as_decorator),
                (score_clamped, compile_with_keywords)]
