"""train_and_log(step, n_steps, log_every): the mean loss per block, one copy to the CPU each."""
from __future__ import annotations

import math
import random

from ...probe import StopProbe, describe, host_read_counter, run_learner
from ..framework import a, check, expect_close, expect_no_error, expect_type, fail


def make_inputs(seed: int, hidden: bool) -> dict:
    rng = random.Random(seed + 1 if hidden else 0)
    log_every, blocks = (rng.choice([2, 3, 5, 10]), rng.randint(2, 5)) if hidden else (4, 3)
    losses = [round(rng.uniform(0.1, 3.0), 3) for _ in range(log_every * blocks)]
    return {"n_steps": len(losses), "log_every": log_every, "losses": losses}


def probe(train_and_log, inputs):
    """Call train_and_log() with a step() that trains one weight and returns a loss of known
    value; count the calls that copy a tensor to the CPU, and the earlier steps' graphs that
    are still alive when a step starts."""
    import weakref

    import torch

    values, markers, kept, log = inputs["losses"], [], [0], []
    weight = torch.ones((), requires_grad=True)

    def step():
        if len(markers) >= len(values):
            raise StopProbe()  # step() called more often than n_steps
        kept[0] = max(kept[0], sum(1 for ref in markers if ref() is not None))
        marker = torch.zeros((), requires_grad=True)  # lives exactly as long as this graph
        markers.append(weakref.ref(marker))
        loss = weight * values[len(markers) - 1] + 0.0 * marker
        loss.backward()
        return loss

    # Each read of a device value (probe/syncs.py's table): on a GPU, each waits for the queue.
    with host_read_counter(log, label=None):
        run = run_learner(train_and_log, step, inputs["n_steps"], inputs["log_every"])
    value = run.value
    floats = value if isinstance(value, list) and all(
        isinstance(item, float) for item in value) else None
    return {"error": run.error, "stopped": run.stopped, "returned": describe(value),
            "values": floats, "steps": len(markers), "syncs": log, "graphs_kept": kept[0]}


def _success(inputs: dict) -> str:
    return (f"train_and_log() returns the mean loss of each block of {inputs['log_every']} "
            f"steps ({inputs['n_steps']} steps), copies one number to the CPU per block, and "
            "keeps no step's graph alive.")


DETACH = ("keep the running total on the device and detached, `running = running + "
          "loss.detach()`, and call `.item()` once per block.")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_train_and_log(inputs, observations, hidden):
    n_steps, every, losses = inputs["n_steps"], inputs["log_every"], inputs["losses"]
    blocks = n_steps // every
    expect_no_error(observations["error"], "train_and_log()", hints={
        "ZeroDivisionError": "divide by `log_every`, the number of steps in a block."})
    if observations["stopped"] or observations["steps"] != n_steps:
        how_often = (f"more than {n_steps} times" if observations["stopped"]
                     else f"{observations['steps']} time(s)")
        fail(f"train_and_log(step, n_steps={n_steps}, log_every={every}) called step() "
             f"{how_often}, not n_steps = {n_steps} times.",
             "call `step()` exactly `n_steps` times: `for i in range(n_steps):`.")
    returned = observations["returned"]
    expect_type(returned, "list", "What train_and_log() returned",
                "return a list with one float per block of `log_every` steps.")
    items = returned["items"]
    if any(item["type"] == "Tensor" for item in items):
        unread = "" if observations["syncs"] else (
            ": it read no value to the CPU (no `.item()`, no `float()`)")
        fail(f"train_and_log() returned tensors, not Python floats{unread}.",
             "turn each block's mean into a float with `.item()`: one call per block.")
    if observations["values"] is None:
        kinds = sorted({item["type"] for item in items})
        fail(f"train_and_log() returned a list of {', '.join(a(kind) for kind in kinds)}, "
             "not of floats.", "append one float per block, e.g. `running.item() / log_every`.")
    values = observations["values"]
    if len(values) != blocks:
        every_step = " (one per step)" if len(values) == n_steps else ""
        fail(f"train_and_log() logged {len(values)} value(s){every_step} for n_steps="
             f"{n_steps} steps in blocks of log_every={every}: it should log {blocks}, one "
             f"each time a block of {every} steps ends.",
             "log once every `log_every` steps: `if (i + 1) % log_every == 0:`.")
    syncs = observations["syncs"]
    if len(syncs) > blocks:
        called = ", ".join(sorted({f"`{name}()`" if not name.startswith("__")
                                   else f"`{name.strip('_')}(tensor)`" for name in syncs}))
        fail(f"train_and_log() copied a tensor to the CPU {len(syncs)} times ({called}) for "
             f"{blocks} blocks. On a GPU each copy waits until all queued work has finished: "
             "one synchronisation per step instead of one per block.", DETACH)
    if observations["graphs_kept"]:
        fail("When a step started, the graphs of earlier steps were still alive: the running "
             "total was built from the loss tensors themselves (`running += loss`), so it "
             "keeps every step's autograd graph until the block ends.", DETACH)
    means = [sum(losses[i:i + every]) / every for i in range(0, n_steps, every)]
    sums = [mean * every for mean in means]
    lasts = [losses[i + every - 1] for i in range(0, n_steps, every)]
    for index, (value, mean) in enumerate(zip(values, means, strict=True)):
        if math.isclose(value, sums[index], rel_tol=1e-5) and not math.isclose(
                value, mean, rel_tol=1e-5):
            fail(f"Block {index}'s logged value is the sum of its losses, not their mean.",
                 "divide the block's total by `log_every`.")
        if math.isclose(value, lasts[index], rel_tol=1e-5) and not math.isclose(
                value, mean, rel_tol=1e-5):
            fail(f"Block {index}'s logged value is the loss of its last step only.",
                 "add up the losses of every step of the block, then divide by `log_every`.")
        window = _window(losses, value, every) if not math.isclose(value, mean, rel_tol=1e-5) \
            else None
        if window is not None:
            first, last, divisor = window
            fail(f"Block {index}'s logged value, {value:.5g}, is the{' negated' * (value < 0)} "
                 f"sum of the losses of steps {first + 1} to {last + 1} divided by {divisor}, "
                 f"not the mean of steps {index * every + 1} to {(index + 1) * every}: the "
                 + ("running total was not reset after the previous block." if first < index
                    * every else "steps added up are not the block's log_every steps."),
                 "add each step's loss to `running`, log `running.item() / log_every` when "
                 "`(i + 1) % log_every == 0`, then reset `running`.")
        expect_close(value, mean, f"Block {index}'s logged mean loss",
                     "add up the block's losses (detached, on the device), divide by "
                     "`log_every`, and reset the total for the next block.", rel=1e-5,
                     reveal=not hidden)


def _window(losses: list[float], value: float, every: int) -> tuple[int, int, int] | None:
    """(first, last, divisor): steps whose losses, summed and divided, give ``value`` (or its
    negation), the divisor log_every or the number of steps; None when no run of steps does."""
    for first in range(len(losses)):
        total = 0.0
        for last in range(first, len(losses)):
            total += losses[last]
            for divisor in (every, last - first + 1):
                if math.isclose(total / divisor, abs(value), rel_tol=1e-5):
                    return first, last, divisor
    return None
