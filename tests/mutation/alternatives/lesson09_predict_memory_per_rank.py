"""Right alternatives: imported from tests/checks/lesson09/test_predict_memory_per_rank.py,
and own."""
from __future__ import annotations

from fractions import Fraction

from ...checks.lesson09.test_predict_memory_per_rank import predict_by_stage, predict_with_numpy


def predict_with_if_chain(param_count, world, strategy, bytes_per_value=4):
    """Own: an if/elif chain, each strategy written out."""
    one = param_count * bytes_per_value
    if strategy == "ddp":
        return {"parameters": one, "gradients": one, "optimizer": 2 * one}
    elif strategy == "zero1":
        return {"parameters": one, "gradients": one, "optimizer": 2 * one / world}
    elif strategy == "zero2":
        return {"parameters": one, "gradients": one / world, "optimizer": 2 * one / world}
    elif strategy == "fsdp":
        return {"parameters": one / world, "gradients": one / world, "optimizer": 2 * one / world}
    raise ValueError(f"strategy must be ddp, zero1, zero2 or fsdp, not {strategy!r}")


def predict_with_fractions(param_count, world, strategy, bytes_per_value=4):
    """Own: exact fractions per part, turned into floats at the end."""
    divisors = {"ddp": (1, 1, 1), "zero1": (1, 1, world), "zero2": (1, world, world),
                "fsdp": (world, world, world)}
    try:
        chosen = divisors[strategy]
    except KeyError:
        raise ValueError(strategy) from None
    values = (1, 1, 2)  # parameters, gradients, AdamW's two moments
    return {part: float(Fraction(count * param_count * bytes_per_value, divisor))
            for part, count, divisor in zip(("parameters", "gradients", "optimizer"), values,
                                            chosen, strict=True)}


def predict_with_match(param_count, world, strategy, bytes_per_value=4):
    """Own: match on the strategy, the sharded set built per case."""
    match strategy:
        case "ddp":
            sharded = set()
        case "zero1":
            sharded = {"optimizer"}
        case "zero2":
            sharded = {"optimizer", "gradients"}
        case "fsdp":
            sharded = {"optimizer", "gradients", "parameters"}
        case _:
            raise ValueError(f"unknown strategy: {strategy}")
    result = {}
    for part, values_per_parameter in (("parameters", 1), ("gradients", 1), ("optimizer", 2)):
        size = values_per_parameter * param_count * bytes_per_value
        result[part] = size / world if part in sharded else size
    return result


ALTERNATIVES = [predict_by_stage, predict_with_numpy, predict_with_if_chain,
                predict_with_fractions, predict_with_match]
