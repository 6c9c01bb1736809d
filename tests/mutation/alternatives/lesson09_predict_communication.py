"""Right alternatives: imported from tests/checks/lesson09/test_predict_communication.py,
and own."""
from __future__ import annotations

from ...checks.lesson09.test_predict_communication import predict_from_table


def predict_call_by_call(strategy, parameter_bytes, units, models):
    """Own: every call listed, each unit moving its share of the bytes."""
    steps = {"ddp": ["all_reduce"], "zero2": ["all_gather", "reduce_scatter"],
             "fsdp": ["all_gather", "all_gather", "reduce_scatter"]}
    if strategy not in steps:
        raise ValueError(strategy)
    total = 0.0
    for operation in steps[strategy]:
        latency, bandwidth = models[operation]
        for _ in range(units):
            total += latency + parameter_bytes / units / bandwidth
    return total


def predict_with_cost_function(strategy, parameter_bytes, units, models):
    """Own: a cost per operation, then the strategy's sum."""
    def cost(operation):
        latency, bandwidth = models[operation]
        return units * latency + parameter_bytes / bandwidth

    if strategy == "ddp":
        return cost("all_reduce")
    gathers = 2 if strategy == "fsdp" else 1
    if strategy not in ("zero2", "fsdp"):
        raise ValueError(f"unknown strategy {strategy}")
    return gathers * cost("all_gather") + cost("reduce_scatter")


def predict_latency_and_transfer(strategy, parameter_bytes, units, models):
    """Own: the latencies and the transfers added up apart."""
    calls = {"ddp": {"all_reduce": 1}, "zero2": {"all_gather": 1, "reduce_scatter": 1},
             "fsdp": {"all_gather": 2, "reduce_scatter": 1}}[strategy]
    latencies = sum(units * count * models[op][0] for op, count in calls.items())
    transfers = sum(count * parameter_bytes / models[op][1] for op, count in calls.items())
    return latencies + transfers


def predict_with_dict_of_lambdas(strategy, parameter_bytes, units, models):
    """Own: one lambda per strategy."""
    def one(op):
        return units * models[op][0] + parameter_bytes / models[op][1]

    table = {"ddp": lambda: one("all_reduce"),
             "zero2": lambda: one("all_gather") + one("reduce_scatter"),
             "fsdp": lambda: 2 * one("all_gather") + one("reduce_scatter")}
    return table[strategy]()


ALTERNATIVES = [predict_from_table, predict_call_by_call, predict_with_cost_function,
                predict_latency_and_transfer, predict_with_dict_of_lambdas]
