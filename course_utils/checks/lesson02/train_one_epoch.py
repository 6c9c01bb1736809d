"""train_one_epoch(model, loader, loss_fn, optimizer, device): one correct epoch on the device."""
from __future__ import annotations

import random

from ...probe import (
    ForwardRecorder,
    Spy,
    StopProbe,
    TrackedBatches,
    build_mlp,
    describe,
    parameter_values,
    run_learner,
)
from .. import references
from ..framework import check, expect_no_error, fail
from . import expect_batches_moved
from .train_one_epoch_rules import verify_mean_loss, verify_returned_float


def make_inputs(seed: int, hidden: bool) -> dict:
    rng = random.Random(seed if hidden else 0)
    f, h, c = (rng.randint(3, 6), rng.choice([6, 10, 12]), rng.randint(2, 4)) if hidden \
        else (4, 8, 3)
    batch_size, n_batches = (rng.choice([2, 3, 5]), rng.randint(3, 5)) if hidden else (4, 4)
    n = batch_size * n_batches
    return {"model": references.mlp_spec(rng, (f, h, c)), "X": references.matrix(rng, n, f),
            "y": [rng.randrange(c) for _ in range(n)], "batch_size": batch_size,
            "lr": rng.choice([0.05, 0.1, 0.2]) if hidden else 0.1}


def probe(train_one_epoch, inputs):
    """1. Model on 'meta' (a stand-in for a GPU): where do the batches arrive, were they moved
    at all? 2. On the CPU: modes, fresh gradients, graphs kept, the final weights."""
    import weakref

    import torch
    import torch.nn.functional as F

    data = torch.utils.data.TensorDataset(torch.tensor(inputs["X"]), torch.tensor(inputs["y"]))
    loader = torch.utils.data.DataLoader(data, batch_size=inputs["batch_size"],
                                         generator=torch.Generator())  # not the global RNG
    meta, moves = {"targets": None}, []
    model = build_mlp(inputs["model"], "meta")
    forwards = ForwardRecorder(model, stop_if=lambda record: record["input_device"] != "meta")

    def meta_loss(outputs, targets):
        meta["targets"] = str(targets.device) if isinstance(targets, torch.Tensor) else None
        raise StopProbe()

    run = run_learner(train_one_epoch, model, TrackedBatches(loader, moves), meta_loss,
                      torch.optim.SGD(model.parameters(), lr=inputs["lr"]), torch.device("meta"))
    meta.update(error=run.error, forwards=forwards.records[:1], moves=moves)

    model = build_mlp(inputs["model"]).eval()  # as evaluation left it: the loop must train()
    forwards = ForwardRecorder(model)
    stale, markers, kept = [], [], [0]
    first = next(model.parameters())
    first.register_hook(lambda grad: stale.append(first.grad is not None
                                                  and bool(first.grad.abs().sum() > 0)))

    def cpu_loss(outputs, targets):
        kept[0] = max(kept[0], sum(1 for ref in markers[:-1] if ref() is not None))
        marker = torch.zeros((), requires_grad=True)  # lives exactly as long as its graph
        markers.append(weakref.ref(marker))
        return F.cross_entropy(outputs, targets) + 0.0 * marker

    optimizer = torch.optim.SGD(model.parameters(), lr=inputs["lr"])
    # Each optimizer.step(): whether it found no gradient to apply (None or zeros).
    with Spy(optimizer, "step", record=lambda *args, **kwargs: first.grad is None or not bool(
            first.grad.abs().sum() > 0)) as steps:
        run = run_learner(train_one_epoch, model, loader, cpu_loss, optimizer,
                          torch.device("cpu"))
    value = run.value
    return {"meta": meta, "cpu": {
        "error": run.error, "returned": describe(value), "losses": len(markers),
        "value": float(value) if isinstance(value, float) else None,
        "modes": [[r["training"], r["grad_enabled"]] for r in forwards.records],
        "stale": sum(stale), "backwards": len(stale), "graphs_kept": kept[0],
        "steps_without_gradient": steps.calls,
        "parameters": parameter_values(model)}}


@check(success="train_one_epoch() moves each batch to the device it is given ('meta' here), "
               "trains with one zero_grad/backward/step per batch as a reference loop does, "
               "and returns the mean loss as a float.", make_inputs=make_inputs, probe=probe)
def check_train_one_epoch(inputs, observations, hidden):
    meta, cpu = observations["meta"], observations["cpu"]
    expect_no_error(cpu["error"], "train_one_epoch()")
    if cpu["modes"] and not cpu["losses"]:
        fail("train_one_epoch() never called the loss function it was given.",
             "compute each batch's loss with `loss = loss_fn(model(features), labels)`.")
    expect_no_error(meta["error"], "train_one_epoch()",
                    where="With the model on PyTorch's data-less 'meta' device (a stand-in for a "
                          "GPU)", hints={"Exception": "the function must work on any device: "
                                         "use the `device` argument in `.to(device)` calls."})
    verify_returned_float(cpu)
    expect_batches_moved(meta, "train_one_epoch()")
    if meta["targets"] not in (None, "meta"):
        fail(f"The labels reached the loss on {meta['targets']!r} while the outputs are on the "
             "device passed in: the labels were not moved.",
             "move the labels too: `labels = labels.to(device)`.")
    if any(not training for training, _ in cpu["modes"]):
        fail("The model ran in evaluation mode during training: the check handed it over in eval "
             "mode (as evaluation leaves it), and the loop never switched it back, so dropout "
             "and batch norm behave as at test time.",
             "call `model.train()` at the start of train_one_epoch().")
    if any(not grad for _, grad in cpu["modes"]):
        fail("The training forward pass ran with gradients disabled, so backward() has nothing "
             "to learn from.",
             "do not wrap the training loop in `torch.no_grad()` or `torch.inference_mode()`.")
    if cpu["stale"]:
        fail(f"In {cpu['stale']} of {cpu['backwards']} backward passes the parameters still held "
             "the previous batch's gradient: without zero_grad, gradients accumulate, and each "
             "step uses the sum of all gradients so far.",
             "call `optimizer.zero_grad()` in every iteration, before `loss.backward()`.")
    if cpu["graphs_kept"]:
        fail("The graphs of earlier batches were still alive while later batches trained: the "
             "loss tensors were kept (`total += loss`, `losses.append(loss)`). backward() frees "
             "the saved activations, but each kept loss holds its graph's nodes, so host memory "
             "grows with every batch.", "keep numbers, not tensors: `total += loss.item()`.")
    n_batches = len(inputs["X"]) // inputs["batch_size"]
    if cpu["losses"] != n_batches:
        fail(f"The loss was computed {cpu['losses']} times for a loader of {n_batches} batches.",
             "go through the loader exactly once: one forward pass and one loss per batch.")
    reference = references.sgd_epoch(inputs["model"], inputs["X"], inputs["y"],
                                     inputs["batch_size"], inputs["lr"])
    start = [inputs["model"][name] for name in ("w1", "b1", "w2", "b2")]
    initial = references.largest_difference(cpu["parameters"], start)
    if initial < 1e-6:  # float32 copies of the same numbers
        steps = cpu["steps_without_gradient"]
        fail("The model's weights did not change during the epoch" + (
             ": no backward pass reached its parameters." if not cpu["backwards"] else
             ": optimizer.step() was never called." if not steps else
             f": each of the {len(steps)} optimizer.step() calls found no gradient to apply "
             "(None or zeros), as when the step runs before backward() or after zero_grad()."
             if all(steps) else "."),
             "after `loss.backward()` call `optimizer.step()`; call `zero_grad()` before "
             "backward, never between backward and step.")
    if references.largest_difference(cpu["parameters"], reference["parameters"]) > 1e-5:
        fail("The weights after the epoch differ from one optimizer step per batch.",
             "in each iteration: zero_grad, forward, loss, `loss.backward()`, then one "
             "`optimizer.step()`.")
    verify_mean_loss(reference["losses"], cpu["value"], hidden)
