"""predict_memory_per_rank(): parameters, gradients and AdamW state per rank under each strategy."""
from __future__ import annotations

import random

from ...probe import describe, run_learner
from ..framework import case, check, expect_no_error, fail
from .reading import number_in, shown

STRATEGIES = ("ddp", "zero1", "zero2", "fsdp")
PARTS = ("parameters", "gradients", "optimizer")
SHARDED = {"ddp": (), "zero1": ("optimizer",), "zero2": ("gradients", "optimizer"),
           "fsdp": PARTS}  # what each strategy divides over the ranks
ADAM_VALUES = 2  # AdamW keeps two moments per parameter


def make_inputs(seed: int, hidden: bool) -> dict:
    if not hidden:
        return {"cases": [[1_000_000, 2, strategy, 4] for strategy in STRATEGIES],
                "unknown": "zero4"}
    rng = random.Random(seed)
    return {"cases": [[rng.randrange(10**5, 10**9), rng.choice([3, 4, 8, 16, 64]), strategy,
                       rng.choice([2, 4])] for strategy in STRATEGIES],
            "unknown": rng.choice(["zero3", "fsdp2", "DDP", "tp"])}


def probe(predict_memory_per_rank, inputs):
    """Call the answer on each case and on a strategy it should refuse; describe the results."""
    runs = [run_learner(predict_memory_per_rank, count, world, strategy, bytes_per_value=size)
            for count, world, strategy, size in inputs["cases"]]
    refused = run_learner(predict_memory_per_rank, 1000, 2, inputs["unknown"]).error
    return {"results": [describe(run.value) for run in runs],
            "errors": [run.error for run in runs], "refused": refused}


def expected(count: int, world: int, strategy: str, size: int) -> dict:
    whole = {"parameters": count * size, "gradients": count * size,
             "optimizer": ADAM_VALUES * count * size}
    return {part: whole[part] / world if part in SHARDED[strategy] else whole[part]
            for part in PARTS}


def _cause(part: str, value: float, count: int, world: int, strategy: str, size: int) -> str:
    """The mistake that gives this value, named first."""
    per_value = ADAM_VALUES * count if part == "optimizer" else count
    sharded = part in SHARDED[strategy]
    if part == "optimizer" and _near(value, count * size / (world if sharded else 1)):
        return "the optimizer state was counted as one value per parameter; AdamW keeps two"
    if sharded and _near(value, per_value * size):
        return f"{strategy} divides the {part} over the ranks, but your value is the whole"
    if not sharded and _near(value, per_value * size / world):
        return f"{strategy} keeps the whole {part} on every rank, but your value is divided"
    if sharded and _near(value, per_value * size / (world - 1)):
        return f"the {part} were divided by world - 1 = {world - 1}, not by the world size"
    if _near(value, per_value / (world if sharded else 1)):
        return "the count of values was returned, not bytes: multiply by bytes_per_value"
    return f"the {part} are not {'divided by the world size' if sharded else 'whole'}"


def _near(value: float, target: float) -> bool:
    return abs(value - target) <= max(1.0, 1e-6 * target)


def _success(inputs: dict) -> str:
    count, world, _, size = inputs["cases"][0]
    return (f"predict_memory_per_rank() gives the bytes per rank for ddp, zero1, zero2 and fsdp "
            f"({count:,} parameters, {world} ranks, {size} bytes per value) and refuses "
            f"{inputs['unknown']!r}.")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_predict_memory_per_rank(inputs, observations, hidden):
    expect_no_error(observations["errors"][0], "predict_memory_per_rank()")
    for (count, world, strategy, size), facts, error in zip(
            inputs["cases"], observations["results"], observations["errors"], strict=True):
        where = f"For {strategy} on {world} ranks ({count:,} parameters, {size} bytes each)"
        with case(f"{strategy}: the bytes per rank", 1):
            expect_no_error(error, "predict_memory_per_rank()", where=where)
            if facts["type"] != "dict" or set(facts["items"]) != set(PARTS):
                fail(f"{where}, predict_memory_per_rank() returned {facts['type']} "
                     f"{sorted(facts.get('items') or []) if facts['type'] == 'dict' else ''}"
                     f"instead of a dict with the keys {list(PARTS)}.",
                     "return {'parameters': ..., 'gradients': ..., 'optimizer': ...}, in bytes.")
            for part, target in expected(count, world, strategy, size).items():
                value = number_in(facts["items"][part])
                if value is None or not _near(value, target):
                    shown_target = f" (expected {target:.6g})" if not hidden else ""
                    fail(f"{where}, {_cause(part, value or 0.0, count, world, strategy, size)}"
                         f": {part} = {shown(value)}{shown_target}.",
                         "per rank: parameters and gradients are count x bytes_per_value, "
                         "AdamW's state twice that; divide by the world size what the "
                         "strategy shards (zero1: optimizer; zero2: + gradients; fsdp: all).")
    with case("refuses an unknown strategy", 1):
        refused = observations["refused"]
        if refused is None or "ValueError" not in refused["kinds"]:
            what = "returned" if refused is None else f"raised {refused['type']}"
            fail(f"predict_memory_per_rank(1000, 2, {inputs['unknown']!r}) {what}: an unknown "
                 "strategy should raise ValueError.",
                 f"raise ValueError naming the strategy and the known ones {list(STRATEGIES)}.")
