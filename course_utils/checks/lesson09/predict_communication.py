"""predict_communication(): one step's collectives under ddp, zero2, fsdp, from fitted models."""
from __future__ import annotations

import random

from ...probe import describe, run_learner
from ..framework import case, check, expect_no_error, fail, is_stub
from .reading import number_in, shown

OPERATIONS = ("all_reduce", "all_gather", "reduce_scatter")
# (operation, calls per unit, times the whole parameter size moves) in one step
PLAN = {"ddp": (("all_reduce", 1, 1),),
        "zero2": (("all_gather", 1, 1), ("reduce_scatter", 1, 1)),
        "fsdp": (("all_gather", 2, 2), ("reduce_scatter", 1, 1))}


def make_inputs(seed: int, hidden: bool) -> dict:
    rng = random.Random(seed if hidden else 0)
    models = {op: [rng.uniform(5e-5, 5e-4), 10 ** rng.uniform(8.5, 10.5)] if hidden else
              [latency, bandwidth] for op, latency, bandwidth in zip(
                  OPERATIONS, (2e-4, 1.5e-4, 2.5e-4), (1.5e9, 2e9, 1e9), strict=True)}
    return {"models": models, "cases": [
        [strategy, rng.randrange(10**6, 10**9) if hidden else 4_000_000,
         rng.randrange(2, 40) if hidden else 5] for strategy in PLAN],
        "unknown": rng.choice(["zero1", "tp", "DDP"]) if hidden else "zero3"}


def probe(predict_communication, inputs):
    """Call the answer for each strategy with the drawn models; describe what it returned."""
    models = {op: tuple(pair) for op, pair in inputs["models"].items()}
    runs = [run_learner(predict_communication, strategy, size, units, models)
            for strategy, size, units in inputs["cases"]]
    unknown = run_learner(predict_communication, inputs["unknown"], 10**6, 2, models)
    return {"cases": [{"returned": describe(run.value), "error": run.error} for run in runs],
            "unknown": {"returned": describe(unknown.value), "error": unknown.error}}


def expected(strategy: str, size: int, units: int, models: dict, plan=None) -> float:
    return sum(calls * units * models[op][0] + moves * size / models[op][1]
               for op, calls, moves in (plan or PLAN[strategy]))


def _cause(value: float, strategy: str, size: int, units: int, models: dict) -> str:
    """The mistake that gives this value, named first."""
    plan = PLAN[strategy]
    latency_once = sum(calls * models[op][0] + moves * size / models[op][1]
                       for op, calls, moves in plan)
    times_bandwidth = sum(calls * units * models[op][0] + moves * size * models[op][1]
                          for op, calls, moves in plan)
    candidates = [
        ("the latency was counted once, not once per call (per unit or bucket)", latency_once),
        ("size x bandwidth was used: a transfer takes size / bandwidth", times_bandwidth)]
    if strategy == "fsdp":
        candidates.append((("fsdp gathers each unit twice (forward, then again in backward): "
                            "only one gather was counted"), expected("zero2", size, units, models)))
    if strategy == "zero2":
        candidates.append((("zero2 keeps the gathered parameters from forward to backward: one "
                            "all-gather per unit, not two"), expected("fsdp", size, units, models)))
    if strategy != "ddp":
        gathers = tuple(step for step in plan if step[0] != "reduce_scatter")
        candidates += [
            ("the reduce-scatter of the gradients is missing",
             expected(strategy, size, units, models, gathers)),
            ("the all-reduce's model was used: these strategies all-gather and reduce-scatter",
             expected("ddp", size, units, models))]
    for cause, target in candidates:
        if abs(value - target) <= 1e-6 * abs(target):
            return cause
    return f"the time is not that of {strategy}'s collectives"


def _success(inputs: dict) -> str:
    _, size, units = inputs["cases"][0]
    return (f"predict_communication() adds up each strategy's collectives (ddp, zero2, fsdp) "
            f"for {size / 2**20:.3g} MiB of parameters in {units} units, from the fitted models.")


def _where(strategy: str, size: int, units: int) -> str:
    """The case, with the collectives its step is made of."""
    step = " and ".join(f"{calls} {op} per unit" for op, calls, _ in PLAN[strategy])
    return f"For {strategy} ({size:,} bytes of parameters, {units} units; its step: {step})"


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_predict_communication(inputs, observations, hidden):
    first = observations["cases"][0]["error"]
    expect_no_error(first, "predict_communication()", where="" if first is None or is_stub(
        first) else _where(*inputs["cases"][0]))
    models = inputs["models"]
    for (strategy, size, units), result in zip(inputs["cases"], observations["cases"],
                                               strict=True):
        where = f"For {strategy} ({size:,} bytes of parameters, {units} units)"
        with case(f"{strategy}: one step's communication", 1):
            expect_no_error(result["error"], "predict_communication()",
                            where=_where(strategy, size, units))
            value, target = number_in(result["returned"]), expected(strategy, size, units,
                                                                    models)
            if value is None or abs(value - target) > 1e-6 * target:
                reveal = "" if hidden else f" (expected {target:.6g} s)"
                cause = "it returned no number" if value is None else _cause(
                    value, strategy, size, units, models)
                fail(f"{where}, {cause}: predict_communication() returned "
                     f"{shown(value)}{reveal}.",
                     "each call costs latency + bytes / bandwidth: ddp all-reduces the "
                     "gradients in `units` buckets; zero2 all-gathers each unit once and "
                     "reduce-scatters its gradients; fsdp all-gathers each unit twice "
                     "(forward and backward) and reduce-scatters once.")
    with case("refuses a strategy it does not know", 1):
        error = observations["unknown"]["error"]
        if error is None or not {"ValueError", "KeyError"} & set(error["kinds"]):
            what = ("returned " + shown(number_in(observations["unknown"]["returned"]))
                    if error is None else f"raised {error['type']}")
            fail(f"predict_communication({inputs['unknown']!r}, ...) {what}: a strategy it "
                 "does not know should raise ValueError (a KeyError from a table will do).",
                 "raise ValueError naming the strategy after the known ones' branches.")
