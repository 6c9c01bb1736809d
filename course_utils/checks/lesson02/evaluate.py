"""evaluate(model, loader, device): accuracy in eval mode, without autograd, on the device."""
from __future__ import annotations

import math
import random
from typing import Any, TypedDict

from ...probe import (  # noqa: F401 (names the probe uses)
    ErrorFacts,
    ForwardRecorder,
    StopProbe,
    TrackedBatches,
    build_mlp,
    describe,
    host_read_counter,
    meta_stand_in,
    run_learner,
)
from .. import references
from ..framework import check, expect_close, expect_no_error, fail, is_stub
from . import StandInStop, expect_batches_moved, expect_one_device


class OnMeta(TypedDict):
    error: ErrorFacts | None  # raised by evaluate() with the model on 'meta'
    forwards: list[dict[str, Any]]  # the first forward pass: ForwardRecorder's record
    moves: list[str]  # the device each .to() of a batch's tensors returned
    stopped: StandInStop | None  # where the stand-in run ended the learner's code


class OnCpu(TypedDict):
    error: ErrorFacts | None  # raised by evaluate() on the CPU
    returned: dict[str, Any]  # probe.describe() of the returned value
    value: float | None  # the returned number, when it is one
    modes: list[list[bool]]  # per forward pass: [training, grad enabled]
    reads: list[str]  # the op of each read of a tensor's value (probe/syncs.py's table)


class Observations(TypedDict):
    meta: OnMeta
    cpu: OnCpu


def make_inputs(seed: int, hidden: bool) -> dict:
    rng = random.Random(seed if hidden else 0)
    batch_size = rng.randint(4, 8) if hidden else 4
    n = batch_size * rng.randint(2, 3) + rng.randint(1, batch_size - 1) if hidden else 10
    f, h, c = (rng.randint(3, 6), rng.choice([12, 16, 20]), rng.randint(2, 5)) if hidden \
        else (5, 16, 3)
    spec = references.mlp_spec(rng, (f, h, c), scale=1.0)
    X = references.matrix(rng, n, f)
    predicted = [max(range(c), key=row.__getitem__) for row in references.python_logits(spec, X)]
    # Labels agree with the model on about 60 % of the examples: an accuracy far from 0 and 1.
    y = [p if rng.random() < 0.6 else rng.randrange(c) for p in predicted]
    return {"model": spec, "X": X, "y": y, "batch_size": batch_size}


def probe(evaluate, inputs):
    """1. Model on 'meta' (a stand-in for a GPU): where do the batches arrive? 2. On the CPU,
    handed over in train mode (as training leaves it): modes, autograd, the returned value."""
    import torch

    data = torch.utils.data.TensorDataset(torch.tensor(inputs["X"]), torch.tensor(inputs["y"]))
    loader = torch.utils.data.DataLoader(data, batch_size=inputs["batch_size"],
                                         generator=torch.Generator())  # not the global RNG
    moves = []
    model = build_mlp(inputs["model"], "meta", dropout=0.5)
    forwards = ForwardRecorder(model, stop_if=lambda record: record["input_device"] != "meta")
    with meta_stand_in() as stand_in:  # on past the forward pass: where do the labels meet it?
        run = run_learner(evaluate, model, TrackedBatches(loader, moves), torch.device("meta"))
    meta = {"error": run.error, "forwards": forwards.records[:1], "moves": moves,
            "stopped": stand_in.stopped}

    model = build_mlp(inputs["model"], dropout=0.5).train()
    forwards, reads = ForwardRecorder(model), []
    with host_read_counter(reads, label=None):
        run = run_learner(evaluate, model, loader, torch.device("cpu"))
    value = run.value
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return {"meta": meta, "cpu": {
        "error": run.error, "returned": describe(value), "value": value if number else None,
        "modes": [[r["training"], r["grad_enabled"]] for r in forwards.records],
        "reads": reads}}


@check(success="evaluate() counts correct predictions over the whole loader, in eval mode and "
               "without autograd, on the device it is given ('meta' here).",
       make_inputs=make_inputs, probe=probe, observes=Observations)
def check_evaluate_accuracy(inputs, observations, hidden):
    meta, cpu = observations["meta"], observations["cpu"]
    ran_none = cpu["error"] and not is_stub(cpu["error"]) and not cpu["modes"]
    expect_no_error(cpu["error"], "evaluate()", where="After running the model on no batch of "
                    "the loader (0 forward passes)" if ran_none else "")
    expect_no_error(meta["error"], "evaluate()",
                    where="With the model on PyTorch's data-less 'meta' device (a stand-in for a "
                          "GPU)", hints={"Exception": "the function must work on any device: "
                                         "use the `device` argument in `.to(device)` calls."})
    if cpu["returned"]["type"] == "Tensor":
        fail("evaluate() returned a tensor, not a Python float" + (
             ": it read no count into Python (no `.item()`, no `int()`)" * (not set(cpu[
                 "reads"]) & {"item", "__int__", "__float__", "tolist"}))
             + ".",
             "count correct predictions with `.sum().item()` (a Python int) and return "
             "`correct / total`.")
    if cpu["value"] is None:
        fail(f"evaluate() returned {cpu['returned']['type']!r}, not a float.",
             "return the fraction of correct predictions, `correct / total`.")
    expect_batches_moved(meta, "evaluate()")
    expect_one_device(meta["stopped"], "evaluate()")
    if any(training for training, _ in cpu["modes"]):
        fail("The model was evaluated in training mode: the check handed it over in train mode "
             "(as training leaves it), so dropout was still active and dropped random "
             "activations. Accuracy comes out random and too low.",
             "call `model.eval()` at the start of evaluate().")
    if any(grad for _, grad in cpu["modes"]):
        fail("Gradients were enabled during evaluation: autograd recorded a graph for every "
             "batch and saved its activations for a backward pass that never comes, which costs "
             "time and memory, and keeps them alive as long as an output or a loss is kept.",
             "run the loop inside `with torch.inference_mode():` (or `torch.no_grad()`).")
    truth = references.accuracy(inputs["model"], inputs["X"], inputs["y"], inputs["batch_size"])
    value = cpu["value"]
    if value > 1:
        if math.isclose(value, 100 * truth["accuracy"], rel_tol=1e-6):
            fail("evaluate() returned a percentage.",
                 "return a fraction in [0, 1]: `correct / total`, without `* 100`.")
        if math.isclose(value, truth["correct"], rel_tol=1e-6):
            fail("evaluate() returned the number of correct predictions.",
                 "divide it by the number of examples, `len(loader.dataset)` or the sum of the "
                 "batch sizes.")
        fail("evaluate() returned a number above 1; accuracy is a fraction in [0, 1].",
             "return `correct / total`, with `total` the number of examples.")
    if not math.isclose(truth["accuracy"], truth["batch_mean"], rel_tol=1e-6) and math.isclose(
            value, truth["batch_mean"], rel_tol=1e-6):
        fail("evaluate() averaged the accuracies of the batches; the last batch is smaller, "
             "so its examples count more than the others.",
             "count correct predictions over all batches and divide by the number of examples.")
    n, counts = len(inputs["y"]), _as_counts(value, len(inputs["y"]))
    if counts and not math.isclose(value, truth["accuracy"], rel_tol=1e-6):
        right = "" if hidden else f", while {truth['correct']} of the {n} examples are right"
        flat = ", as many as comparing the labels with argmax() over each whole batch finds (no " \
            "dim=1: one index for all its logits)" if counts == (truth["flat_argmax_correct"], n) \
            else ""
        fail(f"The returned accuracy, {value:.4g}, is {counts[0]} / {counts[1]}: {counts[0]} "
             f"counted correct of {counts[1]} in total{right}{flat}.",
             "start `correct` and `total` at 0, add `(predictions == labels).sum().item()` and "
             "`labels.shape[0]` for every batch, and return `correct / total`.")
    expect_close(value, truth["accuracy"], "The returned accuracy",
                 "compare `outputs.argmax(dim=1)` with the labels, count the matches over the "
                 "whole loader, and divide by the number of examples.", rel=1e-6,
                 reveal=not hidden)


def _as_counts(value: float, n: int) -> tuple[int, int] | None:
    """(correct, total) as integers, total within 3 of the n examples, whose ratio is
    ``value``: what the learner's counters held (the total nearest n first)."""
    for total in sorted(range(max(1, n - 3), n + 4), key=lambda t: abs(t - n)):
        if math.isclose(round(value * total) / total, value, rel_tol=1e-9):
            return round(value * total), total
    return None
