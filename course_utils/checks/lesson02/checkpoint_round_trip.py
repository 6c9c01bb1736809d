"""save_checkpoint()/load_checkpoint(): model, optimizer and epoch restored on the device asked."""
from __future__ import annotations

import random

from ...probe import (
    Spy,
    build_mlp,
    describe,
    optimizer_state_values,
    parameter_values,
    run_learner,
)
from .. import references
from ..framework import check, expect_no_error, fail, is_kind


def make_inputs(seed: int, hidden: bool) -> dict:
    rng = random.Random(seed if hidden else 0)
    f, h, c = (rng.randint(3, 6), rng.choice([6, 10]), rng.randint(2, 4)) if hidden else (4, 8, 3)
    return {"model": references.mlp_spec(rng, (f, h, c)),
            "fresh": references.mlp_spec(rng, (f, h, c)),
            "X": references.matrix(rng, 8, f), "y": [rng.randrange(c) for _ in range(8)],
            "lr": rng.choice([0.001, 0.005, 0.02]) if hidden else 0.01,
            "steps": rng.randint(1, 3) if hidden else 2,
            "epoch": rng.randint(1, 40) if hidden else 3}


def probe(save_checkpoint, load_checkpoint, inputs):
    """Train and save; load into a fresh model and optimizer on the CPU (are the values back?)
    and on 'meta' (a stand-in for a GPU: does everything end up on the device asked for?)."""
    import os
    import tempfile

    import torch
    import torch.nn.functional as F

    def holds(obj, kind, depth=0):
        if isinstance(obj, kind):
            return True
        items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) \
            else ()
        return depth < 3 and any(holds(item, kind, depth + 1) for item in items)

    model = build_mlp(inputs["model"])
    optimizer = torch.optim.Adam(model.parameters(), lr=inputs["lr"])
    for _ in range(inputs["steps"]):
        optimizer.zero_grad()
        F.cross_entropy(model(torch.tensor(inputs["X"])), torch.tensor(inputs["y"])).backward()
        optimizer.step()
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "checkpoint.pt")
    with Spy(torch, "save", record=lambda obj, *a, **k: {
            "objects": holds(obj, (torch.nn.Module, torch.optim.Optimizer))}) as saves:
        run = run_learner(save_checkpoint, model, optimizer, inputs["epoch"], path)
    observed = {"save_error": run.error, "saves": saves.calls, "written": os.path.exists(path)}
    if run.error or not observed["written"]:
        return observed

    def load_into(device, real):
        fresh = build_mlp(inputs["fresh"])
        fresh_optimizer = torch.optim.Adam(fresh.parameters(), lr=inputs["lr"] * 10)
        log = []
        where = {"optimizer_loaded_on": None}

        def on_optimizer_load(original, *args, **kwargs):
            where["optimizer_loaded_on"] = sorted({str(p.device) for p in fresh.parameters()})
            return original(*args, **kwargs) if real else None

        with Spy(torch, "load", log=log, record=lambda f, map_location=None, *a, **k: {
                "map_location": None if map_location is None else str(map_location),
                "weights_only": k.get("weights_only", "default")}) as loads, \
                Spy(fresh, "to", log=log), \
                Spy(fresh, "load_state_dict", log=log, replacement=None if real else
                    lambda original, *args, **kwargs: None), \
                Spy(fresh_optimizer, "load_state_dict", log=log, replacement=on_optimizer_load):
            run = run_learner(load_checkpoint, path, fresh, fresh_optimizer, torch.device(device))
        return {"error": run.error, "returned": describe(run.value), "loads": loads.calls,
                "events": log, "model_devices": sorted({str(p.device) for p in fresh.parameters()}),
                "parameters": parameter_values(fresh) if real and not run.error else None,
                "optimizer": optimizer_state_values(fresh_optimizer) if real else None,
                "lr": fresh_optimizer.param_groups[0]["lr"], **where}

    observed.update(cpu=load_into("cpu", real=True), meta=load_into("meta", real=False))
    return observed


SAVE_STATE = ("save plain state: `torch.save({'model': model.state_dict(), 'optimizer': "
              "optimizer.state_dict(), 'epoch': epoch}, path)`.")
META = "With a fresh model on the CPU and device='meta' (a stand-in for a GPU)"


def _verify_saved(observations) -> None:  # a file of state dicts, not pickled objects
    expect_no_error(observations["save_error"], "save_checkpoint()")
    if not observations["written"]:
        fail("save_checkpoint() returned without writing a file at `path`.",
             "call `torch.save(checkpoint, path)` with the path it was given.")
    if any(save["objects"] for save in observations["saves"]):
        fail("save_checkpoint() pickled a whole model or optimizer object, not its state_dict(). "
             "Loading such a file needs `weights_only=False`, which runs arbitrary code from "
             "the file, and it breaks as soon as the class changes.", SAVE_STATE)


def _verify_load_call(meta) -> None:  # torch.load(path, map_location=..., weights_only=True)
    load = (meta["loads"] or [{}])[0]
    if load.get("map_location", "given") is None:
        fail("torch.load() was called without `map_location`: every tensor goes back to the "
             "device it was saved from, so a checkpoint written on 'cuda:0' fails to load on a "
             "machine without that GPU.",
             "`torch.load(path, map_location=device, weights_only=True)`.")
    if load.get("weights_only") is False:
        fail("torch.load() was called with `weights_only=False`, which lets the file run "
             "arbitrary code when it is unpickled.",
             "save only state dicts and numbers, and load with `weights_only=True`.")


@check(success="save_checkpoint()/load_checkpoint() restore the model, the optimizer and the "
               "epoch exactly, and put them on the device asked for (CPU and 'meta' here).",
       make_inputs=make_inputs, probe=probe, n_answers=2)
def check_checkpoint_round_trip(inputs, observations, hidden):
    _verify_saved(observations)
    cpu, meta = observations["cpu"], observations["meta"]
    if is_kind(cpu["error"], "UnpicklingError"):
        fail("load_checkpoint() could not read the checkpoint with `weights_only=True`: it holds "
             "Python objects that this safe mode refuses to unpickle.", SAVE_STATE)
    expect_no_error(cpu["error"], "load_checkpoint()")
    if cpu["returned"]["type"] != "int":
        fail(f"load_checkpoint() returned {cpu['returned']['type']!r}, not the epoch (an int).",
             "store the epoch in the checkpoint and `return checkpoint['epoch']`.")
    expect_no_error(meta["error"], "load_checkpoint()", where=META)
    _verify_load_call(meta)
    if meta["model_devices"] != ["meta"]:
        fail(f"{META}, the model ended on {meta['model_devices']}: load_checkpoint() did not move "
             "it to the `device` it was given (loading a state dict copies values into the model "
             "where it already is).", "call `model.to(device)` with the `device` argument.")
    if meta["optimizer_loaded_on"] is None:
        fail("load_checkpoint() did not restore the optimizer: its moments and step counts "
             "restart from zero, so resumed training is not the training that was saved.",
             "call `optimizer.load_state_dict(checkpoint['optimizer'])`.")
    if meta["optimizer_loaded_on"] != ["meta"]:
        fail("The optimizer state was loaded before the model was moved to `device`. "
             "optimizer.load_state_dict() puts each state tensor on the device of its parameter "
             "*at that moment*, so the state stays behind when the model moves afterwards; on a "
             "GPU the next optimizer.step() then fails.",
             "first `model.to(device)`, then `optimizer.load_state_dict(...)`.")
    expected = references.adam_steps(inputs["model"], inputs["X"], inputs["y"], inputs["lr"],
                                     inputs["steps"])
    if references.largest_difference(cpu["parameters"], expected["parameters"]) > 1e-6:
        fail("The model's weights after load_checkpoint() differ from the saved ones.",
             "save `model.state_dict()` and restore it with `model.load_state_dict(...)`.")
    if cpu["lr"] != inputs["lr"] or references.largest_difference(
            cpu["optimizer"], expected["optimizer"]) > 1e-6:
        fail("The optimizer's state after load_checkpoint() differs from the saved one.",
             "save `optimizer.state_dict()` and restore it with `optimizer.load_state_dict(...)` "
             "on the optimizer passed in.")
    if cpu["returned"]["value"] != inputs["epoch"]:
        shown = "" if hidden else f" (saved: {inputs['epoch']})"
        fail(f"load_checkpoint() returned epoch {cpu['returned']['value']}{shown}, not the epoch "
             "that was saved.", "store `epoch` in the checkpoint dict and return "
             "`checkpoint['epoch']`.")
