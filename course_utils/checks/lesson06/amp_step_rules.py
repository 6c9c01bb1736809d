"""amp_step's verdict: the rules a step is held to, and the float64 steps it is compared with.

Kept apart from amp_step.py (inputs, probe, check) so that each file stays one concern; the
rules on the update itself (clipping, the scaler's sequence, the weights) are in
amp_step_update_rules.py.
"""
from __future__ import annotations

import functools
import json
import math
import re

from ...probe import build_mlp, parameter_values
from ..framework import expect_no_error, fail

SCALE, OVERFLOW_SCALE = 256.0, 2.0**40  # 2**40 makes float16 gradients overflow: a skipped step
CALLS = 2  # per case, with one model, optimizer and scaler: the second call sees the first's
# leftover gradients, so zeroing them at the start or at the end of a step are both seen right
LAYERS = ("w1", "b1", "w2", "b2")


def reference_step(drawn: dict, start: list | None = None) -> dict:
    """One float64 step without autocast from ``start`` (parameter values; default the drawn
    model): loss, gradient norm, and the weights after the step."""
    return _reference_of(json.dumps(drawn, sort_keys=True), json.dumps(start))


def reference_steps(drawn: dict) -> list[dict]:
    """CALLS float64 steps in a row from the drawn model."""
    steps, start = [], None
    for _ in range(CALLS):
        steps.append(reference_step(drawn, start))
        start = steps[-1]["params"]
    return steps


@functools.lru_cache(maxsize=64)
def _reference_of(drawn_json: str, start_json: str) -> dict:
    import torch

    drawn, start = json.loads(drawn_json), json.loads(start_json)
    model = build_mlp(dict(zip(LAYERS, start, strict=True)) if start else drawn["model"]).double()
    features = torch.tensor(drawn["features"], dtype=torch.float64)
    loss = torch.nn.functional.cross_entropy(model(features), torch.tensor(drawn["labels"]))
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), drawn.get("max_norm", math.inf))
    if drawn["init_scale"] != OVERFLOW_SCALE:  # an overflowing float16 step is skipped
        torch.optim.SGD(model.parameters(), lr=drawn["lr"]).step()
    return {"loss": loss.item(), "norm": norm.item(), "params": parameter_values(model)}


AUTOCAST = ("wrap the forward pass and the loss in `with torch.autocast(features.device.type, "
            "dtype=dtype):` and leave the model and the batch in float32.")
ORDER = ("call, in this order: scaler.scale(loss).backward(), scaler.unscale_(optimizer) once, "
         "clip_grad_norm_, scaler.step(optimizer), scaler.update().")
HALF = ("keep the model in float32 (no model.half() or model.to(dtype)): the scaler unscales "
        "float32 gradients, and autocast makes the float16 copies itself.")


def _from_scaler(fix: str):
    """A hint for errors the GradScaler raised (classified by where they arose, not by text)."""
    return lambda error: fix if "grad_scaler" in (error["raised_in"] or "") else None


def call_where(drawn: dict, index: int) -> str:
    """How a message names call ``index`` of a case."""
    scaled = "an enabled" if drawn["scaler"] else "a disabled"
    return f"With dtype=torch.{drawn['dtype']} and {scaled} GradScaler" + (
        f", in call {index + 1} (the same model, optimizer and scaler)" if index else "")


def verify_call(drawn: dict, seen: dict, where: str) -> None:
    """One call, up to the step: no error, the forward under autocast, backward and the scaler
    in order (the step itself: amp_step_update_rules.expect_the_step)."""
    expect_no_error(seen["error"], "amp_step(...)", where=where, hints={
        "RuntimeError": _from_scaler(ORDER), "AssertionError": _from_scaler(ORDER),
        "ValueError": _from_scaler(HALF)})
    _expect_autocast_forward(seen, where, f"torch.{drawn['dtype']}")
    _expect_backward_in_order(seen, where, drawn["scaler"])


def _written_device_type(made: dict) -> bool:
    """autocast got 'cpu' from a literal in its call, not from the data's device (a choice
    between "cuda" and "cpu" by the machine is seen on the simulated GPU machine instead)."""
    call = made["call"].replace("device_type", "")
    return made["device_type"] == "cpu" and bool(re.search(r"""['"]cpu['"]""", call)) and \
        "device" not in call and "cuda" not in call


def _expect_autocast_forward(seen: dict, where: str, dtype: str) -> None:
    old = [made["module"] for made in seen["autocasts"] if ".amp.autocast_mode" in made["module"]
           and not made["module"].startswith("torch.amp")]
    if old:
        fail(f"{where}, amp_step used the deprecated {old[0].rsplit('.', 1)[0]}.autocast: it warns "
             "with a FutureWarning and only autocasts one device type.", AUTOCAST)
    if not seen["forwards"]:
        fail(f"{where}, amp_step never ran the model.", "call model(features) under autocast.")
    forward = seen["forwards"][0]
    elsewhere = [made["device_type"] for made in seen["autocasts"] if made["device_type"] != "cpu"]
    if not forward["autocast"]["cpu"] and elsewhere:
        fail(f"{where}, the forward pass ran under autocast for {elsewhere[0]!r}, but the batch is "
             "on the CPU: nothing was autocast.",
             "use the data's device type: torch.autocast(features.device.type, dtype=dtype).")
    if not forward["autocast"]["cpu"]:
        by_hand = forward["input_dtype"] != "float32"
        fail(f"{where}, the forward pass ran without autocast, " + (
            f"on a batch cast to {forward['input_dtype']} by hand." if by_hand else
            "in float32."), AUTOCAST)
    written = [made["call"] for made in seen["autocasts"] if _written_device_type(made)]
    if written:
        fail(f"{where}, autocast's device type is written into the code (`{written[0][:80]}`): "
             "with the batch on a GPU, autocast would still be for the CPU, and the model "
             "would run in float32.",
             "take it from the data: torch.autocast(features.device.type, dtype=dtype).")
    if seen["outputs"][0] != dtype:
        fail(f"{where}, the model's output is {seen['outputs'][0]}: autocast computed in another "
             f"dtype than {dtype}.", "pass the dtype given: torch.autocast(..., dtype=dtype).")
    if seen["losses"] and seen["losses"][0] != "torch.float32":
        fail(f"{where}, the loss was computed in {seen['losses'][0]}, outside autocast on "
             "reduced-precision logits.", "compute the loss inside the autocast block (autocast "
             "runs cross-entropy in float32), or on logits.float().")


def _expect_backward_in_order(seen: dict, where: str, scaled: bool) -> None:
    log = seen["log"]
    if not seen["backwards"]:
        fail(f"{where}, amp_step never called backward().", ORDER)
    if seen["backwards"][0]["autocast"]:
        fail(f"{where}, backward() ran inside the autocast block. Backward ops run in the dtype "
             "autocast chose for their forward ops anyway, and PyTorch advises against autocast "
             "during backward.", "end the `with torch.autocast(...)` block after the loss; call "
             "backward outside it.")
    if seen["backwards"][0]["stale"]:
        fail(f"{where}, the gradients of the previous call were still there at backward(): "
             "backward adds to them, so this step used the sum of both calls' gradients.",
             "zero them once per step: optimizer.zero_grad() at the start of the step (or "
             "after scaler.update(), at its end).")
    if "new GradScaler" in log:
        fail(f"{where}, amp_step created a GradScaler of its own.", "use the `scaler` argument: "
             "it is disabled where scaling is pointless, and it keeps its scale between steps.")
    if scaled and "scaler.scale" not in log[:log.index("backward")]:
        fail(f"{where}, backward() ran on an unscaled loss: small float16 gradients underflow "
             "to zero.", "call scaler.scale(loss).backward().")
    for call in ("step(optimizer)", "update()"):
        if scaled and "scaler." + call.split("(")[0] not in log:
            fail(f"{where}, amp_step never called scaler.{call}. scaler.step skips a step whose "
                 "gradients overflowed; scaler.update lowers the scale after one.", ORDER)
