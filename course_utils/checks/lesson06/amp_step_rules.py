"""amp_step's verdict: the rules a step is held to, and the float64 step it is compared with.

Kept apart from amp_step.py (inputs, probe, check) so that each file stays one concern.
"""
from __future__ import annotations

import functools
import json
import math

from ...probe import build_mlp, parameter_values
from ..framework import expect_close, expect_no_error, fail

SCALE, OVERFLOW_SCALE = 256.0, 2.0**40  # 2**40 makes float16 gradients overflow: a skipped step


def reference_step(drawn: dict) -> dict:
    """A float64 step without autocast: loss, gradient norm, and the weights after the step."""
    return _reference_of(json.dumps(drawn, sort_keys=True))


@functools.lru_cache(maxsize=64)
def _reference_of(drawn_json: str) -> dict:
    import torch

    drawn = json.loads(drawn_json)
    model = build_mlp(drawn["model"]).double()
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


def verify(drawn: dict, seen: dict, hidden: bool) -> None:
    """One case: the forward under autocast, backward and the scaler in order, then the step."""
    dtype, scaled = f"torch.{drawn['dtype']}", drawn["scaler"]
    where = f"With dtype={dtype} and {'an enabled' if scaled else 'a disabled'} GradScaler"
    expect_no_error(seen["error"], "amp_step(...)", where=where, hints={
        "RuntimeError": _from_scaler(ORDER), "AssertionError": _from_scaler(ORDER),
        "ValueError": _from_scaler(HALF)})
    _expect_autocast_forward(seen, where, dtype)
    _expect_backward_in_order(seen, where, scaled)
    _expect_the_step(drawn, seen, where, hidden)


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
        fail(f"{where}, the gradients of the previous step were still there at backward(): "
             "backward adds to them.", "call optimizer.zero_grad() at the start of the step.")
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


def _expect_the_step(drawn: dict, seen: dict, where: str, hidden: bool) -> None:
    reference, steps = reference_step(drawn), seen["steps"]
    if drawn["init_scale"] == OVERFLOW_SCALE and steps:
        fail(f"{where}, the scaled gradients overflowed, yet optimizer.step() ran on them.",
             "step with scaler.step(optimizer): it skips the step when a gradient is inf.")
    if drawn["init_scale"] != OVERFLOW_SCALE and len(steps) != 1:
        fail(f"{where}, optimizer.step() ran {len(steps)} times.", "scaler.step(optimizer) "
             "calls optimizer.step() itself: call one of them, once.")
    if steps:
        _expect_clipped(steps[0]["norm"], drawn, reference["norm"], where)
    if seen["returned"]["type"] != "float":
        fail(f"{where}, amp_step returned {seen['returned']['type']!r}.", "return loss.item().")
    expect_close(seen["returned"]["value"], reference["loss"], f"{where}, the loss amp_step "
                 "returned", "return loss.item() of the unscaled loss.", rel=0.03, abs_tol=0.02,
                 reveal=not hidden)
    after, expected = _flat(seen["params"]), _flat(reference["params"])
    update = math.dist(_flat(parameter_values(build_mlp(drawn["model"]))), expected)
    # bfloat16 keeps 8 bits of mantissa: a right step lands up to 15 % of the update away
    # (measured over 80 draws); a step not clipped, or clipped while scaled, lands 100 % away.
    tolerance = 0.3 if drawn["dtype"] == "bfloat16" else 0.1
    if not all(map(math.isfinite, after)) or math.dist(after, expected) > tolerance * update + 1e-6:
        fail(f"{where}, the weights after the step are not those of a float32 step clipped to "
             "max_norm.", ORDER)


def _flat(values) -> list[float]:
    return [x for v in values for x in (_flat(v) if isinstance(v, list) else [v])]


def _expect_clipped(norm: float | None, drawn: dict, unclipped: float, where: str) -> None:
    target = drawn["max_norm"]  # half the norm of the unclipped gradients
    if norm is not None and abs(norm - target) <= 0.05 * target:
        return
    if norm is not None and drawn["scaler"] and norm < target / 10:
        fail(f"{where}, the gradients were clipped while still scaled, then unscaled: at the "
             "step their norm was max_norm divided by the scale.",
             "call scaler.unscale_(optimizer) before clip_grad_norm_.")
    if norm is None or (drawn["scaler"] and norm > 10 * unclipped):
        fail(f"{where}, optimizer.step() ran on gradients still multiplied by the scale.", ORDER)
    if abs(norm - unclipped) <= 0.05 * unclipped:
        fail(f"{where}, the gradients were not clipped (their norm was twice max_norm).",
             "call torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm) before the step.")
    fail(f"{where}, the gradient norm at the step was {norm:.4g}, not max_norm.",
         "clip with clip_grad_norm_(model.parameters(), max_norm) after scaler.unscale_.")
