"""Tests of the check course_utils/checks/lesson09/predict_communication.py."""
from __future__ import annotations

from course_utils import checks

from ...probe_roundtrip import failure, graded, passes
from ...solutions import solution
from .shared import LESSON

check = checks.check_predict_communication
predict_communication = solution(LESSON, "predict_communication")
CALLS = {"ddp": {"all_reduce": 1}, "zero2": {"all_gather": 1, "reduce_scatter": 1},
         "fsdp": {"all_gather": 2, "reduce_scatter": 1}}


def predict_from_table(strategy, parameter_bytes, units, models):
    """Right: a table of calls per unit, each moving the parameters' size."""
    return sum(count * (units * models[op][0] + parameter_bytes / models[op][1])
               for op, count in CALLS[strategy].items())


def test_the_model_answer_and_alternative_pass():
    passes(check, predict_communication)
    passes(check, predict_from_table)


def test_fsdp_with_one_gather_is_named():
    def one_gather(strategy, parameter_bytes, units, models):
        return predict_communication("zero2" if strategy == "fsdp" else strategy,
                                     parameter_bytes, units, models)
    assert "gathers each unit twice" in failure(check, one_gather)
    assert graded(check, (one_gather,), hidden=True, seed=1).fraction == 3 / 4


def test_latency_once_is_named():
    def latency_once(strategy, parameter_bytes, units, models):
        return predict_communication(strategy, parameter_bytes, 1, models)
    assert "latency was counted once" in failure(check, latency_once)


def test_times_bandwidth_is_named():
    def times_bandwidth(strategy, parameter_bytes, units, models):
        inverted = {op: (latency, 1 / bandwidth) for op, (latency, bandwidth) in models.items()}
        return predict_communication(strategy, parameter_bytes, units, inverted)
    assert "size x bandwidth" in failure(check, times_bandwidth)


def test_all_reduce_everywhere_is_named():
    def all_reduce_only(strategy, parameter_bytes, units, models):
        return predict_communication("ddp", parameter_bytes, units, models)
    assert "all-reduce's model was used" in failure(check, all_reduce_only)


def test_an_unknown_strategy_must_raise():
    def returns_zero(strategy, parameter_bytes, units, models):
        if strategy not in CALLS:
            return 0.0
        return predict_communication(strategy, parameter_bytes, units, models)
    assert "should raise ValueError" in failure(check, returns_zero)


def test_a_strategy_that_raises_is_told_its_collectives():
    def without_fsdp(strategy, parameter_bytes, units, models):
        if strategy == "fsdp":
            raise ValueError(f"unknown strategy {strategy!r}")
        return predict_communication(strategy, parameter_bytes, units, models)
    assert ("For fsdp (4,000,000 bytes of parameters, 5 units; its step: 2 all_gather per unit "
            "and 1 reduce_scatter per unit), predict_communication() raised ValueError") in \
        failure(check, without_fsdp)
