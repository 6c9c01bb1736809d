"""Tests of the check course_utils/checks/lesson09/predict_memory_per_rank.py."""
from __future__ import annotations

import numpy as np
import torch

from course_utils import checks

from ...probe_roundtrip import failure, graded, passes
from ...solutions import solution
from .shared import LESSON

check = checks.check_predict_memory_per_rank
predict_memory_per_rank = solution(LESSON, "predict_memory_per_rank")
SHARDS = {"ddp": 0, "zero1": 1, "zero2": 2, "fsdp": 3}  # how many parts, from the optimizer back


def predict_by_stage(param_count, world, strategy, bytes_per_value=4):
    """Right: ZeRO stages as numbers; the parts sharded from the last one back."""
    if strategy not in SHARDS:
        raise ValueError(strategy)
    sizes = [param_count * bytes_per_value] * 2 + [2 * param_count * bytes_per_value]
    stage = SHARDS[strategy]
    return dict(zip(("parameters", "gradients", "optimizer"),
                    [size / world if index >= 3 - stage else size
                     for index, size in enumerate(sizes)], strict=True))


def predict_with_numpy(param_count, world, strategy, bytes_per_value=4):
    """Right: NumPy numbers, the optimizer's two moments as a product."""
    if strategy not in {"ddp", "zero1", "zero2", "fsdp"}:
        raise ValueError(f"no strategy {strategy}")
    one = np.float64(param_count) * bytes_per_value
    return {"parameters": one / world if strategy == "fsdp" else one,
            "gradients": one / world if strategy in ("zero2", "fsdp") else one,
            "optimizer": 2 * one / (1 if strategy == "ddp" else world)}


def test_the_model_answer_and_alternatives_pass():
    passes(check, predict_memory_per_rank)
    passes(check, predict_by_stage)
    passes(check, predict_with_numpy)


def test_a_tensor_per_part_passes():
    def as_tensors(param_count, world, strategy, bytes_per_value=4):
        values = predict_memory_per_rank(param_count, world, strategy, bytes_per_value)
        return {part: torch.tensor(float(value), dtype=torch.float64)
                for part, value in values.items()}
    passes(check, as_tensors, seeds=[1])


def test_forgetting_adams_two_moments_is_named():
    def one_moment(param_count, world, strategy, bytes_per_value=4):
        values = predict_memory_per_rank(param_count, world, strategy, bytes_per_value)
        return {**values, "optimizer": values["optimizer"] / 2}
    assert "AdamW keeps two" in failure(check, one_moment)


def test_zero1_sharding_the_gradients_too_is_named():
    def zero1_as_zero2(param_count, world, strategy, bytes_per_value=4):
        return predict_memory_per_rank(param_count, world,
                                       "zero2" if strategy == "zero1" else strategy,
                                       bytes_per_value)
    assert "zero1 keeps the whole gradients" in failure(check, zero1_as_zero2)


def test_world_minus_one_is_named():
    def off_by_one(param_count, world, strategy, bytes_per_value=4):
        values = predict_memory_per_rank(param_count, world - 1, strategy, bytes_per_value)
        return values
    assert "world - 1" in failure(check, off_by_one, hidden=True, seed=1)


def test_counts_instead_of_bytes_is_named():
    def counts(param_count, world, strategy, bytes_per_value=4):
        return predict_memory_per_rank(param_count, world, strategy, 1)
    assert "multiply by bytes_per_value" in failure(check, counts, hidden=True, seed=1)


def test_an_unknown_strategy_must_raise_and_costs_one_case():
    def accepts_anything(param_count, world, strategy, bytes_per_value=4):
        if strategy not in SHARDS:
            return {}
        return predict_memory_per_rank(param_count, world, strategy, bytes_per_value)
    assert "should raise ValueError" in failure(check, accepts_anything)
    assert graded(check, (accepts_anything,), hidden=True, seed=1).fraction == 0.8


def test_the_stub_says_not_implemented():
    def stub(param_count, world, strategy, bytes_per_value=4):
        raise NotImplementedError()
    assert "not implemented yet" in failure(check, stub)
