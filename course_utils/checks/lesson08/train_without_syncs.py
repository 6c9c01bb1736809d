"""train_without_syncs(): the same training, one read of a device value, after the loop."""
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
from ..framework import check, expect_close, expect_no_error, fail
from ..references import sgd_batches

STEP = "for each batch: optimizer.zero_grad(), loss_fn(model(features), labels), backward, step."


def _draw(rng: random.Random, batches: int) -> dict:
    def matrix(rows, cols, spread=0.5):
        return [[round(rng.uniform(-spread, spread), 4) for _ in range(cols)] for _ in range(rows)]
    model = {"w1": matrix(8, 6), "b1": matrix(1, 8)[0], "w2": matrix(3, 8), "b2": [0.0] * 3}
    return {"model": model, "lr": 0.3, "batches": [
        [matrix(5, 6, 2.0), [rng.randrange(3) for _ in range(5)]] for _ in range(batches)]}


def make_inputs(seed: int, hidden: bool) -> dict:
    rng = random.Random(2000 + seed if hidden else 8)
    return {"cases": [_draw(rng, rng.randint(3, 6) if hidden else 4)]}


def probe(train_without_syncs, inputs):
    """Train once; log each batch handed out, each read of a device value, each step."""
    import warnings

    import torch

    drawn = inputs["cases"][0]
    model, log = build_mlp(drawn["model"]), []
    loss_fn, kept, losses = loss_watch(log)  # "graph kept": a total not detached
    data = [(torch.tensor(f), torch.tensor(y)) for f, y in drawn["batches"]]

    class Batches:
        def __len__(self):
            return len(data)

        def __iter__(self):
            for index, batch in enumerate(data):
                log.append(f"batch {index}")
                yield batch
            log.append("loop ended")

    optimizer = torch.optim.SGD(model.parameters(), lr=drawn["lr"])
    first = next(model.parameters())

    def held() -> bool:  # a gradient, not cleared, on the first parameter
        with torch._C.DisableTorchFunction():  # the probe's own look: no read of the learner's
            return first.grad is not None and bool(first.grad.abs().sum() > 0)
    first.register_hook(lambda grad: log.append("backward onto a gradient" if held() else
                                                "backward"))
    # Each read of a device value, judged by its meaning (probe/syncs.py's table), as on a GPU.
    with Spy(optimizer, "step", "step", log, record=lambda *a, **k: held()) as steps, \
            host_read_counter(log, "read"), kept, \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")  # float(loss) warns about requires_grad: a read
        run = run_learner(train_without_syncs, model, Batches(), loss_fn, optimizer)
    value = run.value
    return {"error": run.error, "log": log, "type": type_name(value),
            "value": float(value) if isinstance(value, (int, float)) else None,
            "losses": [loss.detach().item() for loss in losses],
            "steps_with_gradient": sum(steps.calls),
            "params": parameter_values(model)}


@functools.lru_cache(maxsize=32)
def _reference_of(drawn_json: str) -> dict:
    drawn = json.loads(drawn_json)
    losses, params = sgd_batches(drawn["model"], drawn["batches"], drawn["lr"])
    return {"mean": sum(losses) / len(losses), "params": params}


def _success(inputs: dict) -> str:
    return (f"train_without_syncs() trained {len(inputs['cases'][0]['batches'])} batches like the "
            "original loop and read one device value, after the loop, to return the mean loss.")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_train_without_syncs(inputs, observations, hidden):
    drawn, seen = inputs["cases"][0], observations
    expect_no_error(seen["error"], "train_without_syncs(model, batches, loss_fn, optimizer)")
    log, count = seen["log"], len(drawn["batches"])
    ended = log.index("loop ended") if "loop ended" in log else len(log)
    inside = [i for i, event in enumerate(log[:ended]) if event == "read"]
    if inside:
        batch = next(e for e in reversed(log[:inside[0]]) if e.startswith("batch"))
        per_step = len(inside) / count
        fail(f"train_without_syncs read a value from the device inside the loop ({len(inside)} "
             f"reads for {count} batches, the first during {batch}): .item(), float(), print, "
             "a comparison in an `if`, .cpu() or .tolist() on a device tensor each make the host "
             "wait for the device" + (", every step." if per_step >= 1 else "."),
             "keep the running total on the device (total = total + loss.detach()) and call "
             ".item() once, after the loop.")
    reads = log[ended:].count("read")
    if seen["type"] != "float":
        fail(f"train_without_syncs returned {seen['type']!r}, not a Python float.",
             "read the total once after the loop: return total.item() / len(batches).")
    if reads > 1:
        fail(f"train_without_syncs read {reads} device values after the loop; one is enough.",
             "divide on the device, or after a single .item(): total.item() / len(batches).")
    if "graph kept" in log:
        fail("train_without_syncs added the loss itself to a running total (or kept it in a "
             "list of tensors): the total then holds every step's autograd graph alive.",
             "add loss.detach() to the total, not loss.")
    steps = log.count("step")
    if steps != count:
        fail(f"train_without_syncs called optimizer.step() {steps} times for {count} batches.",
             STEP)
    reference = _reference_of(json.dumps(drawn, sort_keys=True))
    after = [x for p in seen["params"] for x in _flat(p)]
    expected = [x for p in reference["params"] for x in _flat(p)]
    if math.dist(after, expected) > 1e-4 * (1 + math.hypot(*expected)):
        backwards = [event for event in log if event.startswith("backward")]
        onto = backwards.count("backward onto a gradient")
        fail("The weights after train_without_syncs differ from those of the original loop" + (
             ": no backward pass reached the model's parameters." if not backwards else
             f": in {onto} of {len(backwards)} backward passes the parameters still held the "
             "previous batch's gradient, not cleared by optimizer.zero_grad() or otherwise, so "
             "the gradients added up across steps." if onto else
             ": no optimizer.step() found a gradient to apply." if steps and not seen[
                 "steps_with_gradient"] else "."),
             "call optimizer.zero_grad() before each backward (gradients add up otherwise); "
             + STEP)
    recorded = seen["losses"]
    if seen["value"] is not None and recorded and abs(seen["value"] - sum(recorded)) < 1e-4 * (
            1 + abs(sum(recorded))) and count > 1:
        fail("train_without_syncs returned the sum of the losses, not their mean.",
             "divide the total by len(batches).")
    expect_close(seen["value"], reference["mean"], "the mean loss train_without_syncs returned",
                 "return the mean of the losses of all the steps: total.item() / len(batches).",
                 rel=1e-4, abs_tol=1e-5, reveal=not hidden)


def _flat(values) -> list[float]:
    return [x for v in values for x in (_flat(v) if isinstance(v, list) else [v])]
