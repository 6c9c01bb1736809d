"""predict(model, inputs): run the model where it lives, return its outputs on the CPU."""
from __future__ import annotations

import random

from ...probe import StopProbe, build_mlp, describe, run_learner, track_moves
from ..framework import a, check, expect_close, expect_dtype, expect_no_error, expect_shape, fail


def make_inputs(seed: int, hidden: bool) -> dict:
    rng = random.Random(seed + 1 if hidden else 0)
    d, h, o, batch = (rng.randint(2, 5), rng.randint(3, 6), rng.randint(1, 3),
                      rng.randint(1, 4)) if hidden else (3, 4, 2, 2)

    def matrix(rows, cols):
        return [[round(rng.uniform(-1, 1), 2) for _ in range(cols)] for _ in range(rows)]

    return {"model": {"w1": matrix(h, d), "b1": matrix(1, h)[0], "w2": matrix(o, h),
                      "b2": matrix(1, o)[0]}, "x": matrix(batch, d)}


def probe(predict, inputs):
    """1. A CPU model: what predict() returns. 2. A model on 'meta' (data-less: a stand-in for
    a GPU) whose forward records where the inputs arrive, and outputs that record where
    predict() sends them; both stop the call before anything needs real numbers."""
    import torch

    x = torch.tensor(inputs["x"])
    run = run_learner(predict, build_mlp(inputs["model"]), x)
    on_cpu = {"error": run.error, "returned": describe(run.value),
              "inputs_unchanged": bool(torch.equal(x, torch.tensor(inputs["x"])))}

    seen, moves, applied, returned_to = [], [], [], []

    class Output(torch.Tensor):  # outputs that record where .cpu() or .to() sends them
        def cpu(self, *args, **kwargs):
            returned_to.append("cpu")
            raise StopProbe()

        def to(self, *args, **kwargs):  # a non_blocking copy to the host is unfinished
            for target in [kwargs.get("device"), *args]:  # until a sync: marked as such
                if isinstance(target, (str, torch.device)):
                    returned_to.append(str(torch.device(target)) + " non_blocking" * bool(
                        kwargs.get("non_blocking")))
            if {"cpu", "cpu non_blocking"} & set(returned_to):
                raise StopProbe()
            return super().to(*args, **kwargs)

    class OnMeta(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, batch):
            seen.append(str(batch.device) if isinstance(batch, torch.Tensor)
                        else type(batch).__name__)
            if seen[-1] != "meta":
                raise StopProbe()  # the real model would fail here with a device mismatch
            return self.inner(batch).as_subclass(Output)

        def _apply(self, *args, **kwargs):  # Module.to(), .cpu() and .cuda() go through here
            applied.append(True)
            return super()._apply(*args, **kwargs)

    model = OnMeta(build_mlp(inputs["model"], device="meta"))
    run = run_learner(predict, model, track_moves(torch.tensor(inputs["x"]), moves))
    on_meta = {"error": run.error, "returned": describe(run.value), "seen": seen,
               "moves": moves, "model_moved": bool(applied), "returned_to": returned_to,
               "model_devices": sorted({str(p.device) for p in model.parameters()})}
    return {"cpu": on_cpu, "meta": on_meta}


def reference_outputs(inputs: dict) -> list[float]:
    """relu(x @ w1.T + b1) @ w2.T + b2, flattened, in plain Python."""
    def linear(rows, weight, bias):
        return [[sum(r * w for r, w in zip(row, ws, strict=True)) + b
                 for ws, b in zip(weight, bias, strict=True)] for row in rows]

    model = inputs["model"]
    hidden = [[max(v, 0.0) for v in row] for row in linear(inputs["x"], model["w1"], model["b1"])]
    return [v for row in linear(hidden, model["w2"], model["b2"]) for v in row]


MOVE_INPUTS = ("move the inputs to the model instead: "
               "`inputs = inputs.to(next(model.parameters()).device)`.")
HINTS = {
    "AttributeError": lambda error: (
        "not every model has `.weight` or `.device`: ask its parameters, "
        "`next(model.parameters()).device`." if error["attribute"] in ("weight", "device")
        else None),
    "Exception": lambda error: (  # e.g. torch.cuda raising on a machine without CUDA
        "don't name a device in predict(): use the model's own device, "
        "`next(model.parameters()).device`."
        if (error["raised_in"] or "").startswith("torch/cuda") else None),
}


@check(success="predict() runs the model on the device its parameters are on (CPU and "
               "'meta' here) and returns its outputs on the CPU, detached from autograd.",
       make_inputs=make_inputs, probe=probe)
def check_predict(inputs, observations, hidden):
    on_cpu, on_meta = observations["cpu"], observations["meta"]
    where = "With a model and inputs on the CPU"
    expect_no_error(on_cpu["error"], "predict()", where=where, hints=HINTS)
    result = on_cpu["returned"]
    if result["type"] != "Tensor":
        fail(f"{where}, predict() returned {a(result['type'])}, not a tensor.",
             "return a tensor, `outputs.cpu()`; the caller can call `.numpy()` on it.")
    expected = reference_outputs(inputs)
    fix = "return `model(inputs)`, unchanged apart from the move to the CPU."
    expect_shape(result, [len(inputs["x"]), len(inputs["model"]["w2"])],
                 f"{where}, the result", fix)
    expect_dtype(result, "float32", f"{where}, the result", "only move the outputs: `.cpu()`.")
    if result["device"] != "cpu":
        fail(f"{where}, predict() returned outputs on {result['device']!r}.",
             "return `outputs.cpu()`: the caller wants them on the CPU.")
    if result["requires_grad"] or result["has_grad_fn"]:
        fail(f"{where}, predict() returned outputs still attached to the autograd graph, so "
             "`.numpy()` fails on them and the graph is kept for a backward pass that never "
             "comes.", "run the model inside `with torch.no_grad():` (or return "
             "`outputs.detach().cpu()`).")
    for index, (got, want) in enumerate(zip(result["values"], expected, strict=True)):
        expect_close(got, want, f"{where}, output value {index}", fix, rel=1e-4, abs_tol=1e-5,
                     reveal=not hidden)
    if not on_cpu["inputs_unchanged"]:
        fail(f"{where}, predict() changed the inputs tensor it was given.",
             "don't modify `inputs` in place: `inputs = inputs.to(device)` makes a new name.")
    _verify_on_meta(on_meta)


def _verify_on_meta(on_meta: dict) -> None:
    where = "With a model on the 'meta' device (a stand-in for a GPU)"
    seen, moves = on_meta["seen"], on_meta["moves"]
    if on_meta["model_moved"] or on_meta["model_devices"] != ["meta"]:
        fail(f"{where}, predict() moved the model: its caller decided where the model lives.",
             MOVE_INPUTS)
    expect_no_error(on_meta["error"], "predict()", where=where, hints=HINTS)
    if not seen:
        fail(f"{where}, predict() never called the model (or swallowed its exception).",
             "call `model(inputs)` and let exceptions through.")
    if seen[0] != "meta":
        if moves and seen[0] not in moves:
            fail(f"{where}, predict() called `inputs.to(...)`, but the model still received "
                 f"inputs on {seen[0]!r}: the moved copy was thrown away.",
                 "`inputs.to(device)` returns a new tensor: assign it, "
                 "`inputs = inputs.to(device)`.")
        if moves:
            fail(f"{where}, predict() moved the inputs to {moves[-1]!r}, not to the model's "
                 "device.", "ask the model where it lives instead of choosing a device: "
                 "`inputs = inputs.to(next(model.parameters()).device)`.")
        fail(f"{where}, the model received inputs on {seen[0]!r}: predict() did not move them.",
             MOVE_INPUTS)
    if "cpu non_blocking" in on_meta["returned_to"]:
        fail(f"{where}, predict() copied the outputs to the CPU with non_blocking=True and "
             "returned them: on a GPU that copy may still be running when the caller reads "
             "them (nothing waits for it).", "return `outputs.cpu()`, a copy that waits.")
    if "cpu" not in on_meta["returned_to"]:
        fail(f"{where}, predict() returned the outputs on "
             f"{on_meta['returned'].get('device')!r}, the model's device, instead of bringing "
             "them back to the CPU.", "return `outputs.cpu()`.")
