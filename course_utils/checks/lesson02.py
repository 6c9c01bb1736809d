"""Checks for lesson 02, "A training loop on the device".

The learner's loop must be right on a GPU, but the checks run on machines with
only a CPU. Two tricks make device mistakes visible there:

* the ``meta`` device: tensors with a shape and no data. A model built on it is
  "somewhere else" than the CPU batches a loader yields, exactly like a model on a
  GPU. A forward pre-hook records where each batch arrives and stops the learner's
  function with a private exception before anything needs real numbers;
* hooks that record facts as the loop runs: ``module.training`` and
  ``torch.is_grad_enabled()`` at every forward pass, whether a parameter still holds
  an old gradient when a new one arrives (no ``zero_grad``), and whether the graphs
  of earlier batches are still alive (loss tensors kept instead of ``loss.item()``).
"""
from __future__ import annotations

import math
import random

from ._core import check, expect_close, expect_no_probe_error, fail
from ._probe_support import describe, error_text, patched, seeded_mlp, type_name

# ================================================================ train_one_epoch

def _epoch_inputs(seed: int, hidden: bool) -> dict:
    if not hidden:
        return {"seed": 0, "hidden": False, "n_features": 4, "hidden_units": 8,
                "n_classes": 3, "batch_size": 4, "n_batches": 4, "lr": 0.1}
    rng = random.Random(seed)
    return {"seed": rng.randrange(10_000), "hidden": True, "n_features": rng.randint(3, 6),
            "hidden_units": rng.choice([6, 10, 12]), "n_classes": rng.randint(2, 4),
            "batch_size": rng.choice([2, 3, 5]), "n_batches": rng.randint(3, 5),
            "lr": rng.choice([0.05, 0.1, 0.2])}


def probe_train_one_epoch(train_one_epoch, inputs):
    """Run train_one_epoch on the meta device (where do batches go?) and on the CPU (the rest)."""
    import copy
    import weakref

    import torch
    import torch.nn.functional as F

    class StopProbe(BaseException):
        """Stops the learner's loop once the checker has seen what it needs."""

    f, h, c = inputs["n_features"], inputs["hidden_units"], inputs["n_classes"]
    batch_size, n_batches = inputs["batch_size"], inputs["n_batches"]
    gen = torch.Generator().manual_seed(inputs["seed"])
    X = torch.randn(batch_size * n_batches, f, generator=gen)
    y = torch.randint(0, c, (batch_size * n_batches,), generator=gen)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y),
                                         batch_size=batch_size, generator=torch.Generator())

    def make_model(device):
        return seeded_mlp((f, h, c), gen, device, scale=0.5)

    # 1. meta: does each batch reach the model on the model's device?
    meta = {}
    model = make_model("meta")

    def arrive(module, args):
        first = args[0] if args else None
        meta["input_device"] = str(first.device) if isinstance(first, torch.Tensor) else None
        if meta["input_device"] != "meta":
            raise StopProbe()

    def meta_loss(outputs, targets):
        meta["target_device"] = str(targets.device) if isinstance(targets, torch.Tensor) else None
        raise StopProbe()

    model.register_forward_pre_hook(arrive)
    optimizer = torch.optim.SGD(model.parameters(), lr=inputs["lr"])
    try:
        train_one_epoch(model, loader, meta_loss, optimizer, torch.device("meta"))
        meta["finished"] = True
    except StopProbe:
        pass
    except Exception as error:  # the learner's code raised: report it
        meta["error"] = error_text(error)

    # 2. CPU: modes, fresh gradients, freed graphs, the returned value, the updated weights
    model = make_model("cpu")
    initial = copy.deepcopy(model)
    model.eval()  # as evaluation would have left it: the loop must switch to training mode
    forwards, stale, losses, markers = [], [], [], []
    kept = {"graphs": 0}

    def record(module, args):
        forwards.append({"training": bool(module.training), "grad": torch.is_grad_enabled()})

    def arriving_gradient(grad, param):
        # Runs before the new gradient is added to param.grad.
        old = param.grad
        stale.append(old is not None and bool(old.abs().sum() > 0))

    def cpu_loss(outputs, targets):
        # Graphs of batches before the previous one must be gone by now.
        older = sum(1 for ref in markers[:-1] if ref() is not None)
        kept["graphs"] = max(kept["graphs"], older)
        marker = torch.zeros((), requires_grad=True)  # lives exactly as long as this graph
        markers.append(weakref.ref(marker))
        loss = F.cross_entropy(outputs, targets)
        losses.append(loss.item())
        return loss + 0.0 * marker

    model.register_forward_pre_hook(record)
    first_param = next(model.parameters())
    first_param.register_hook(lambda grad, p=first_param: arriving_gradient(grad, p))
    optimizer = torch.optim.SGD(model.parameters(), lr=inputs["lr"])
    cpu = {}
    try:
        value = train_one_epoch(model, loader, cpu_loss, optimizer, torch.device("cpu"))
        cpu["result"] = describe(value)
        cpu["is_float"] = isinstance(value, float) and not isinstance(value, bool)
        if cpu["is_float"]:
            cpu["value"] = float(value)
    except Exception as error:  # the learner's code raised: report it
        cpu["error"] = error_text(error)

    reference = copy.deepcopy(initial)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=inputs["lr"])
    reference.train()
    for features, labels in loader:
        reference_optimizer.zero_grad()
        F.cross_entropy(reference(features), labels).backward()
        reference_optimizer.step()

    def largest_difference(a, b):
        return max((p - q).abs().max().item() for p, q in zip(a.parameters(), b.parameters()))

    cpu.update(
        forwards=len(forwards),
        eval_forwards=sum(1 for item in forwards if not item["training"]),
        no_grad_forwards=sum(1 for item in forwards if not item["grad"]),
        backwards=len(stale),
        stale_backwards=sum(stale),
        graphs_kept=kept["graphs"],
        losses=losses,
        weights_changed=largest_difference(model, initial) > 0,
        difference_from_reference=largest_difference(model, reference),
    )
    return {"meta": meta, "cpu": cpu}


def _expect_ran_on_meta(meta: dict, what: str) -> None:
    """Fail when the learner's function crashed with the model on the meta device."""
    if "error" in meta:
        fail(f"With the model on PyTorch's data-less 'meta' device (a stand-in for a GPU), "
             f"{what} raised {meta['error']}.",
             "the function must work on any device: use the `device` argument only in "
             "`.to(device)` calls on the model and on each batch.")


def _expect_batches_moved(meta: dict, what: str) -> None:
    """Fail unless the model (on 'meta' in the check) received batches moved to its device."""
    if meta.get("input_device") is None:
        fail(f"{what} never called the model on a batch from the loader.",
             "loop `for features, labels in loader:` and call `model(features)` in the loop.")
    if meta["input_device"] != "meta":
        fail(f"A batch reached the model on {meta['input_device']!r} while the model is on the "
             "device passed in ('meta' in this check): the data were not moved to the model's "
             "device. On a GPU this raises 'Expected all tensors to be on the same device'.",
             "inside the loop, write `features, labels = features.to(device), labels.to(device)`"
             " with the `device` argument (not a global variable).")


@check(success="train_one_epoch() moves each batch, trains, and returns the mean loss as a float.",
       make_inputs=_epoch_inputs, probe=probe_train_one_epoch)
def check_train_one_epoch(inputs, observations):
    expect_no_probe_error(observations, "train_one_epoch()")
    meta, cpu = observations["meta"], observations["cpu"]
    n_batches = inputs["n_batches"]
    if "error" in cpu:
        expect_no_probe_error({"probe_error": cpu["error"]}, "train_one_epoch()")
    if cpu["forwards"] and not cpu["losses"]:
        fail("train_one_epoch() never called the loss function it was given.",
             "compute each batch's loss with `loss = loss_fn(model(features), labels)`.")
    _expect_ran_on_meta(meta, "train_one_epoch()")

    # type
    result = cpu["result"]
    if result["type"] == "Tensor":
        if result.get("has_grad_fn"):
            fail("train_one_epoch() returned a tensor that still carries its autograd graph "
                 "(it has a grad_fn): the losses were added up as tensors, which keeps every "
                 "batch's graph alive.",
                 "add `loss.item()` (a Python float) to your running total instead of `loss`.")
        fail("train_one_epoch() returned a tensor, not a Python float.",
             "add up `loss.item()` values (or call `.item()` on the result) and return a float.")
    if not cpu["is_float"]:
        fail(f"train_one_epoch() returned a {result['type']}, not a Python float.",
             "return the mean loss of the epoch: the sum of `loss.item()` divided by the number "
             "of batches.")

    # device
    _expect_batches_moved(meta, "train_one_epoch()")
    if meta.get("target_device") not in (None, "meta"):
        fail(f"The labels reached the loss on {meta['target_device']!r} while the model's "
             "outputs are on the device passed in: the labels were not moved.",
             "move the labels too: `labels = labels.to(device)`.")

    # how the loop trains
    if cpu["eval_forwards"]:
        fail("The model ran in evaluation mode during training: the checker handed it over in "
             "eval mode (as evaluation leaves it), and the loop never switched it back, so "
             "dropout and batch norm behave as at test time.",
             "call `model.train()` at the start of train_one_epoch().")
    if cpu["no_grad_forwards"]:
        fail("The training forward pass ran with gradients disabled, so there is nothing for "
             "backward() to learn from.",
             "do not wrap the training loop in `torch.no_grad()` or `torch.inference_mode()`.")
    if cpu["stale_backwards"]:
        fail(f"In {cpu['stale_backwards']} of {cpu['backwards']} backward passes the parameters "
             "still held the previous batch's gradient: without zero_grad, gradients "
             "accumulate, and each step uses the sum of all gradients so far.",
             "call `optimizer.zero_grad()` in every iteration, before `loss.backward()`.")
    if cpu["graphs_kept"]:
        fail("The autograd graphs of earlier batches were still alive while later batches "
             "trained: the loss tensors were kept (e.g. `total += loss` or "
             "`losses.append(loss)`). Memory grows with every batch, and on a GPU it may run "
             "out.",
             "keep numbers, not tensors: `total += loss.item()`.")
    if len(cpu["losses"]) != n_batches:
        fail(f"The loss was computed {len(cpu['losses'])} times for a loader of {n_batches} "
             "batches.",
             "go through the loader exactly once, with one forward pass and one loss per batch.")
    if not cpu["weights_changed"]:
        fail("The model's weights did not change during the epoch.",
             "after `loss.backward()`, call `optimizer.step()`; call `zero_grad()` before "
             "backward, never between backward and step.")
    if cpu["difference_from_reference"] > 1e-5:
        fail("The weights after the epoch differ from one optimizer step per batch.",
             "in each iteration: zero_grad, forward, loss, `loss.backward()`, then one "
             "`optimizer.step()`.")

    # value
    losses, value = cpu["losses"], cpu["value"]
    mean = sum(losses) / len(losses)
    if math.isclose(value, losses[-1], rel_tol=1e-5) and not math.isclose(value, mean,
                                                                          rel_tol=1e-5):
        fail("train_one_epoch() returned the loss of the last batch only.",
             "add up `loss.item()` over all batches and divide by the number of batches.")
    if math.isclose(value, sum(losses), rel_tol=1e-5):
        fail("train_one_epoch() returned the sum of the batch losses, not their mean.",
             "divide the total by the number of batches, `len(loader)`.")
    expect_close(value, mean, "The returned mean loss",
                 "return the sum of `loss.item()` over the batches divided by the number of "
                 "batches.", rel=1e-5, reveal=not inputs["hidden"])


# ================================================================ evaluate

def _evaluate_inputs(seed: int, hidden: bool) -> dict:
    if not hidden:
        return {"seed": 0, "hidden": False, "n": 10, "batch_size": 4, "n_features": 5,
                "hidden_units": 16, "n_classes": 3}
    rng = random.Random(seed)
    batch_size = rng.randint(4, 8)
    n = batch_size * rng.randint(2, 3) + rng.randint(1, batch_size - 1)  # a short last batch
    return {"seed": rng.randrange(10_000), "hidden": True, "n": n, "batch_size": batch_size,
            "n_features": rng.randint(3, 6), "hidden_units": rng.choice([12, 16, 20]),
            "n_classes": rng.randint(2, 5)}


def probe_evaluate(evaluate, inputs):
    """Run evaluate on the meta device (where do batches go?) and on the CPU (the rest)."""
    import copy

    import torch

    class StopProbe(BaseException):
        """Stops the learner's loop once the checker has seen what it needs."""

    n, f, h, c = inputs["n"], inputs["n_features"], inputs["hidden_units"], inputs["n_classes"]
    gen = torch.Generator().manual_seed(inputs["seed"])

    def make_model(device):
        return seeded_mlp((f, h, c), gen, device, dropout=0.5)

    model = make_model("cpu")
    X = torch.randn(n, f, generator=gen)
    with torch.no_grad():
        predicted = copy.deepcopy(model).eval()(X).argmax(dim=1)
    # Labels agree with the model on about 60 % of the examples: an accuracy far from 0 and 1.
    agree = torch.rand(n, generator=gen) < 0.6
    y = torch.where(agree, predicted, torch.randint(0, c, (n,), generator=gen))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, y),
                                         batch_size=inputs["batch_size"],
                                         generator=torch.Generator())

    # 1. meta: where does each batch arrive?
    meta = {}
    meta_model = make_model("meta")

    def arrive(module, args):
        first = args[0] if args else None
        meta["input_device"] = str(first.device) if isinstance(first, torch.Tensor) else None
        raise StopProbe()

    meta_model.register_forward_pre_hook(arrive)
    try:
        evaluate(meta_model, loader, torch.device("meta"))
        meta["finished"] = True
    except StopProbe:
        pass
    except Exception as error:  # the learner's code raised: report it
        meta["error"] = error_text(error)

    # 2. CPU: mode and autograd at each forward pass, and the returned value
    forwards = []

    def record(module, args):
        forwards.append({"training": bool(module.training), "grad": torch.is_grad_enabled()})

    model.train()  # as a training epoch leaves it
    model.register_forward_pre_hook(record)
    cpu = {}
    try:
        value = evaluate(model, loader, torch.device("cpu"))
        cpu["result"] = describe(value)
        cpu["is_number"] = isinstance(value, (int, float)) and not isinstance(value, bool)
        if cpu["is_number"]:
            cpu["value"] = float(value)
    except Exception as error:  # the learner's code raised: report it
        cpu["error"] = error_text(error)

    correct, batch_accuracies = 0, []
    for start in range(0, n, inputs["batch_size"]):
        hits = (predicted[start:start + inputs["batch_size"]]
                == y[start:start + inputs["batch_size"]])
        correct += int(hits.sum())
        batch_accuracies.append(hits.float().mean().item())
    cpu.update(
        forwards=len(forwards),
        train_forwards=sum(1 for item in forwards if item["training"]),
        grad_forwards=sum(1 for item in forwards if item["grad"]),
        correct=correct,
        n=n,
        mean_batch_accuracy=sum(batch_accuracies) / len(batch_accuracies),
    )
    return {"meta": meta, "cpu": cpu}


@check(success="evaluate() measures accuracy in eval mode, without autograd, on the device.",
       make_inputs=_evaluate_inputs, probe=probe_evaluate)
def check_evaluate_accuracy(inputs, observations):
    expect_no_probe_error(observations, "evaluate()")
    meta, cpu = observations["meta"], observations["cpu"]
    if "error" in cpu:
        expect_no_probe_error({"probe_error": cpu["error"]}, "evaluate()")
    _expect_ran_on_meta(meta, "evaluate()")

    # type
    result = cpu["result"]
    if result["type"] == "Tensor":
        fail("evaluate() returned a tensor, not a Python float.",
             "count correct predictions with `.sum().item()` (a Python int) and return "
             "`correct / total`.")
    if not cpu["is_number"]:
        fail(f"evaluate() returned a {result['type']}, not a float.",
             "return the fraction of correct predictions, `correct / total`.")

    # device
    _expect_batches_moved(meta, "evaluate()")

    # how it evaluates
    if cpu["train_forwards"]:
        fail("The model was evaluated in training mode: the checker handed it over in train "
             "mode (as training leaves it), so dropout was still active and dropped random "
             "activations. Accuracy comes out random and too low.",
             "call `model.eval()` at the start of evaluate().")
    if cpu["grad_forwards"]:
        fail("Gradients were computed during evaluation: autograd recorded a graph for every "
             "batch, which costs memory and time and is never used.",
             "run the loop inside `with torch.inference_mode():` (or `torch.no_grad()`).")

    # value
    value, correct, n = cpu["value"], cpu["correct"], cpu["n"]
    accuracy = correct / n
    if value > 1:
        if math.isclose(value, 100 * accuracy, rel_tol=1e-6):
            fail("evaluate() returned a percentage.",
                 "return a fraction in [0, 1]: `correct / total`, without `* 100`.")
        if math.isclose(value, correct, rel_tol=1e-6):
            fail("evaluate() returned the number of correct predictions.",
                 "divide it by the number of examples, `len(loader.dataset)` or the sum of the "
                 "batch sizes.")
        fail("evaluate() returned a number above 1; accuracy is a fraction in [0, 1].",
             "return `correct / total`, with `total` the number of examples.")
    if not math.isclose(accuracy, cpu["mean_batch_accuracy"], rel_tol=1e-6) and math.isclose(
            value, cpu["mean_batch_accuracy"], rel_tol=1e-6):
        fail("evaluate() averaged the accuracies of the batches; the last batch is smaller, "
             "so its examples count more than the others.",
             "count correct predictions over all batches and divide by the number of examples.")
    expect_close(value, accuracy, "The returned accuracy",
                 "compare `outputs.argmax(dim=1)` with the labels, count the matches over the "
                 "whole loader, and divide by the number of examples.",
                 rel=1e-6, reveal=not inputs["hidden"])


# ================================================================ checkpoints

def _checkpoint_inputs(seed: int, hidden: bool) -> dict:
    if not hidden:
        return {"seed": 0, "hidden": False, "n_features": 4, "hidden_units": 8, "n_classes": 3,
                "lr": 0.01, "steps": 2, "epoch": 3}
    rng = random.Random(seed)
    return {"seed": rng.randrange(10_000), "hidden": True, "n_features": rng.randint(3, 6),
            "hidden_units": rng.choice([6, 10]), "n_classes": rng.randint(2, 4),
            "lr": rng.choice([0.001, 0.005, 0.02]), "steps": rng.randint(1, 3),
            "epoch": rng.randint(1, 40)}


def probe_checkpoint_round_trip(save_checkpoint, load_checkpoint, inputs):
    """Save a trained model and its Adam state, load them into fresh ones, and record how."""
    import copy
    import os
    import tempfile

    import torch
    import torch.nn.functional as F

    f, h, c = inputs["n_features"], inputs["hidden_units"], inputs["n_classes"]
    gen = torch.Generator().manual_seed(inputs["seed"])

    def make_model():
        return seeded_mlp((f, h, c), gen, "cpu", scale=0.5)

    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=inputs["lr"])
    X = torch.randn(8, f, generator=gen)
    y = torch.randint(0, c, (8,), generator=gen)
    for _ in range(inputs["steps"]):
        optimizer.zero_grad()
        F.cross_entropy(model(X), y).backward()
        optimizer.step()
    saved_model, saved_state = copy.deepcopy(model.state_dict()), copy.deepcopy(
        optimizer.state_dict())

    fresh = make_model()  # other weights, and an optimizer with another lr and no state
    fresh_optimizer = torch.optim.Adam(fresh.parameters(), lr=inputs["lr"] * 10)

    events, saves, loads = [], [], []
    real_save, real_load = torch.save, torch.load

    def holds(obj, kind, depth=0):
        if isinstance(obj, kind):
            return True
        if depth < 3 and isinstance(obj, dict):
            return any(holds(item, kind, depth + 1) for item in obj.values())
        if depth < 3 and isinstance(obj, (list, tuple)):
            return any(holds(item, kind, depth + 1) for item in obj)
        return False

    def recording_save(obj, *args, **kwargs):
        saves.append({"type": type_name(obj),
                      "holds_module": holds(obj, torch.nn.Module),
                      "holds_optimizer": holds(obj, torch.optim.Optimizer)})
        return real_save(obj, *args, **kwargs)

    def recording_load(f, map_location=None, *args, **kwargs):
        if map_location is None or isinstance(map_location, (str, torch.device)):
            where = None if map_location is None else str(torch.device(map_location))
        else:
            where = type_name(map_location)
        loads.append({"map_location": where,
                      "weights_only": kwargs.get("weights_only", "default")})
        events.append("torch.load")
        return real_load(f, map_location, *args, **kwargs)

    def fresh_to(*args, **kwargs):
        events.append("model.to")
        return type(fresh).to(fresh, *args, **kwargs)

    def fresh_load_state_dict(*args, **kwargs):
        events.append("model.load_state_dict")
        return type(fresh).load_state_dict(fresh, *args, **kwargs)

    def optimizer_load_state_dict(*args, **kwargs):
        events.append("optimizer.load_state_dict")
        return type(fresh_optimizer).load_state_dict(fresh_optimizer, *args, **kwargs)

    observations = {"saves": saves, "loads": loads, "events": events}
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.pt")
        with patched([(torch, "save", recording_save), (torch, "load", recording_load)]):
            try:
                save_checkpoint(model, optimizer, inputs["epoch"], path)
            except Exception as error:  # the learner's code raised: report it
                observations["save_error"] = error_text(error)
                return observations
            observations["file_written"] = os.path.exists(path)
            if not observations["file_written"]:
                return observations
            with patched([(fresh, "to", fresh_to),
                          (fresh, "load_state_dict", fresh_load_state_dict),
                          (fresh_optimizer, "load_state_dict", optimizer_load_state_dict)]):
                try:
                    value = load_checkpoint(path, fresh, fresh_optimizer, torch.device("cpu"))
                except Exception as error:  # the learner's code raised: report it
                    observations["load_error"] = error_text(error)
                    return observations

    observations["result"] = describe(value)
    observations["epoch"] = value if isinstance(value, int) and not isinstance(value, bool) \
        else None
    observations["model_difference"] = max(
        (fresh.state_dict()[key].float() - saved.float()).abs().max().item()
        for key, saved in saved_model.items())
    observations["model_devices"] = sorted({str(p.device) for p in fresh.parameters()})
    new_state = fresh_optimizer.state_dict()
    observations["lr_restored"] = new_state["param_groups"][0]["lr"] == inputs["lr"]
    difference, devices_match, complete = 0.0, True, True
    new_params = [p for group in fresh_optimizer.param_groups for p in group["params"]]
    for index, saved in saved_state["state"].items():
        state = new_state["state"].get(index, {})
        param = new_params[index] if index < len(new_params) else None
        for key, tensor in saved.items():
            if key not in state:
                complete = False
                continue
            difference = max(difference, (state[key].float().cpu() - tensor.float()).abs()
                             .max().item())
            if param is not None and tensor.shape == param.shape \
                    and state[key].device != param.device:
                devices_match = False
    observations.update(optimizer_difference=difference, optimizer_state_complete=complete,
                        optimizer_devices_match=devices_match)
    return observations


@check(success="save_checkpoint()/load_checkpoint() restore the model, the optimizer and the "
               "epoch on the requested device.",
       make_inputs=_checkpoint_inputs, probe=probe_checkpoint_round_trip, n_answers=2)
def check_checkpoint_round_trip(inputs, observations):
    expect_no_probe_error(observations, "the checkpoint round trip")
    saves, loads, events = observations["saves"], observations["loads"], observations["events"]
    saved_objects = [item for item in saves if item["holds_module"] or item["holds_optimizer"]]
    object_fix = ("save plain state: `torch.save({'model': model.state_dict(), 'optimizer': "
                  "optimizer.state_dict(), 'epoch': epoch}, path)`.")
    if "save_error" in observations:
        expect_no_probe_error({"probe_error": observations["save_error"]}, "save_checkpoint()")
    if not observations["file_written"]:
        fail("save_checkpoint() returned without writing a file at `path`.",
             "call `torch.save(checkpoint, path)` with the path it was given.")
    if saved_objects:
        fail("save_checkpoint() pickled a whole model or optimizer object, not its "
             "state_dict(). Loading such a file needs `weights_only=False`, which runs arbitrary "
             "code from the file, and it breaks as soon as the class changes.", object_fix)
    if "load_error" in observations:
        error = observations["load_error"]
        if "weights only" in error.lower() or "unpickl" in error.lower():
            fail("load_checkpoint() could not read the checkpoint with `weights_only=True`: it "
                 "holds Python objects that this safe mode refuses to unpickle "
                 f"({error.split(':')[0]}).", object_fix)
        expect_no_probe_error({"probe_error": error}, "load_checkpoint()")

    # type
    result = observations["result"]
    if observations["epoch"] is None:
        fail(f"load_checkpoint() returned a {result['type']}, not the epoch (an int).",
             "store the epoch in the checkpoint and `return checkpoint['epoch']`.")

    # device
    if loads:
        if loads[0]["map_location"] is None:
            fail("torch.load() was called without `map_location`: every tensor goes back to "
                 "the device it was saved from, so a checkpoint written on 'cuda:0' fails to "
                 "load on a machine without that GPU.",
                 "`torch.load(path, map_location=device, weights_only=True)`.")
        if loads[0]["weights_only"] is False:
            fail("torch.load() was called with `weights_only=False`, which lets the file run "
                 "arbitrary code when it is unpickled.",
                 "save only state dicts and numbers, and load with `weights_only=True`.")
    if "model.to" not in events:
        fail("load_checkpoint() never moved the model to `device`: loading a state dict copies "
             "values into the model where it already is.",
             "call `model.to(device)` in load_checkpoint().")
    if "optimizer.load_state_dict" not in events:
        fail("load_checkpoint() did not restore the optimizer: its moments and step counts "
             "restart from zero, so resumed training is not the training that was saved.",
             "call `optimizer.load_state_dict(checkpoint['optimizer'])`.")
    first_move = events.index("model.to")
    if events.index("optimizer.load_state_dict") < first_move:
        fail("The optimizer state was loaded before the model was moved to `device`. "
             "optimizer.load_state_dict() puts each state tensor on the device of its parameter "
             "*at that moment*, so the state stays behind when the model moves afterwards. On "
             "a GPU the next optimizer.step() then fails: a parameter and its state are on "
             "different devices.",
             "first `model.to(device)`, then `optimizer.load_state_dict(...)`.")
    if observations["model_devices"] != ["cpu"] or not observations["optimizer_devices_match"]:
        fail("After loading, the model or its optimizer state is not on the requested device.",
             "move the model with `model.to(device)` before `optimizer.load_state_dict(...)`.")

    # values
    if observations["model_difference"] > 0:
        fail("The model's weights after load_checkpoint() differ from the saved ones.",
             "save `model.state_dict()` and restore it with `model.load_state_dict(...)`.")
    if not observations["lr_restored"] or not observations["optimizer_state_complete"] \
            or observations["optimizer_difference"] > 0:
        fail("The optimizer's state after load_checkpoint() differs from the saved one.",
             "save `optimizer.state_dict()` and restore it with "
             "`optimizer.load_state_dict(...)` on the optimizer passed in.")
    if observations["epoch"] != inputs["epoch"]:
        shown = "" if inputs["hidden"] else f" (saved: {inputs['epoch']})"
        fail(f"load_checkpoint() returned epoch {observations['epoch']}{shown}, not the epoch "
             "that was saved.",
             "store `epoch` in the checkpoint dict and return `checkpoint['epoch']`.")
