"""train_until(): the same training, stopped at the right check, one read of the device each."""
from __future__ import annotations

import functools
import json
import math
import random

from ...probe import (
    Spy,
    build_mlp,
    host_read_counter,
    loss_watch,
    parameter_values,
    run_learner,
    type_name,
)
from ..framework import case, check, expect_no_error, fail
from .train_until_rules import READ_FIX, draw_case, reference, stop_fix

WHAT = "train_until(model, batches, loss_fn, optimizer, target, every)"


def make_inputs(seed: int, hidden: bool) -> dict:
    # Drawing trains a model until the loss falls as wanted: once per seed in a process.
    return json.loads(_drawn_inputs(seed, hidden))


@functools.lru_cache(maxsize=16)
def _drawn_inputs(seed: int, hidden: bool) -> str:
    return json.dumps(_draw_inputs(seed, hidden))


def _draw_inputs(seed: int, hidden: bool) -> dict:
    rng = random.Random(5000 + seed if hidden else 12)
    if not hidden:
        return {"cases": [draw_case(rng, every=3, batches=12, stop_check=2)]}
    every = rng.choice([2, 3, 4])
    return {"cases": [
        draw_case(rng, every=every, batches=every * 4 + 1, stop_check=rng.choice([2, 3])),
        draw_case(rng, every=rng.choice([2, 3]), batches=rng.choice([7, 8, 10]),
                  stop_check=None)]}


def probe(train_until, inputs):
    """Train each case; log each batch handed out, each optimizer step, each device read."""
    import warnings

    import torch

    results = []
    for drawn in inputs["cases"]:
        model, log = build_mlp(drawn["model"]), []
        loss_fn, kept, _ = loss_watch(log)  # "graph kept": a window total not detached
        data = [(torch.tensor(f), torch.tensor(y)) for f, y in drawn["batches"]]

        def batches(data=data, log=log):
            for index, batch in enumerate(data):
                log.append(f"batch {index}")
                yield batch
            log.append("loop ended")

        optimizer = torch.optim.SGD(model.parameters(), lr=drawn["lr"])
        with Spy(optimizer, "step", "step", log), host_read_counter(log, "read"), kept, \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")  # float(loss) warns about requires_grad: a read
            run = run_learner(train_until, model, batches(), loss_fn, optimizer,
                              drawn["target"], drawn["every"])
        value = run.value
        results.append({"error": run.error, "log": log, "type": type_name(value),
                        "value": value if type_name(value) == "int" else None,
                        "params": parameter_values(model)})
    return results


@functools.lru_cache(maxsize=32)
def _reference_of(drawn_json: str) -> dict:
    return reference(json.loads(drawn_json))


def _reads_by_step(log: list[str]) -> dict[int, int]:
    """Step number (0 before the first step) -> the reads between it and the next step."""
    reads: dict[int, int] = {}
    step = 0
    for event in log:
        if event == "step":
            step += 1
        elif event == "read":
            reads[step] = reads.get(step, 0) + 1
    return reads


def _label(drawn: dict) -> str:
    stops = "never reached" if drawn["stop_check"] is None else \
        f"reached at check {drawn['stop_check']}"
    return f"{len(drawn['batches'])} batches, every={drawn['every']}, the target {stops}"


def _verify_case(drawn: dict, seen: dict) -> None:
    where = f"With {_label(drawn)}"
    expect_no_error(seen["error"], WHAT, where=where)
    expected = _reference_of(json.dumps(drawn, sort_keys=True))
    reads, every = _reads_by_step(seen["log"]), drawn["every"]
    steps_taken = seen["log"].count("step")
    off_check = {s: n for s, n in reads.items() if s == 0 or s % every or s > steps_taken}
    if off_check:
        step = min(off_check)
        fail(f"{where}, train_until read a device value after step {step}, which is not a "
             f"check (checks come after steps {every}, {2 * every}, ...): "
             f"{sum(reads.values())} reads in {steps_taken} steps.", READ_FIX)
    doubled = {s: n for s, n in reads.items() if n > 1}
    if doubled:
        step = min(doubled)
        fail(f"{where}, train_until read {doubled[step]} device values at the check after "
             f"step {step}; one is enough.", "add the detached losses up on the device and "
             "read their mean once: (window / every).item().")
    if seen["type"] != "int":
        fail(f"{where}, train_until returned {seen['type']!r}, not the number of steps (int).",
             "count the steps in a Python int and return it.")
    if steps_taken != expected["steps"] or seen["value"] != expected["steps"]:
        cause, fix = stop_fix(drawn, expected, steps_taken, seen["value"])
        fail(f"{where}, {cause}", fix)
    if "graph kept" in seen["log"]:
        fail(f"{where}, train_until added the loss itself to the window (not loss.detach()): "
             "the window then holds every step's autograd graph alive.",
             "add loss.detach() to the window, not loss.")
    checks_made = expected["steps"] // every
    missing = [s for s in range(every, expected["steps"] + 1, every) if s not in reads]
    if missing:
        fail(f"{where}, train_until made no read at the check after step {missing[0]} "
             f"({checks_made} checks expected).", READ_FIX)
    after = [x for p in seen["params"] for x in _flat(p)]
    target = [x for p in expected["params"] for x in _flat(p)]
    if math.dist(after, target) > 1e-4 * (1 + math.hypot(*target)):
        fail(f"{where}, the weights after train_until differ from a run of the same steps: "
             "without optimizer.zero_grad() before each backward, gradients add up.",
             "call optimizer.zero_grad(), then loss_fn(model(features), labels), backward() "
             "and optimizer.step(), once per batch.")


def _success(inputs: dict) -> str:
    return ("train_until() trained, stopped at the right step and read one device value per "
            "check on: " + "; ".join(_label(d) for d in inputs["cases"]) + ".")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_train_until(inputs, observations, hidden):
    for drawn, seen in zip(inputs["cases"], observations, strict=True):
        with case(_label(drawn)):
            _verify_case(drawn, seen)


def _flat(values) -> list[float]:
    return [x for v in values for x in (_flat(v) if isinstance(v, list) else [v])]
