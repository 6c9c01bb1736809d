"""amp_step(): forward under autocast, backward outside it, unscale before clipping, scaler.step."""
from __future__ import annotations

import functools
import json
import math
import random

from ...probe import ForwardRecorder, Spy, build_mlp, describe, parameter_values, run_learner
from ..framework import case, check, expect_close, expect_no_error, fail

SCALE, OVERFLOW_SCALE = 256.0, 2.0**40  # 2**40 makes float16 gradients overflow: a skipped step


def _draw(rng: random.Random, dtype: str, scaler: bool, init_scale: float) -> dict:
    def matrix(rows, cols, spread=0.5):
        return [[round(rng.uniform(-spread, spread), 4) for _ in range(cols)] for _ in range(rows)]
    spec = {"w1": matrix(16, 8), "b1": matrix(1, 16)[0], "w2": matrix(4, 16), "b2": [0.0] * 4}
    drawn = {"dtype": dtype, "scaler": scaler, "init_scale": init_scale, "model": spec, "lr": 0.5,
             "features": matrix(16, 8, 2.0), "labels": [rng.randrange(4) for _ in range(16)]}
    drawn["max_norm"] = round(_reference(drawn)["norm"] / 2, 6)  # so that clipping bites
    return drawn


def make_inputs(seed: int, hidden: bool) -> dict:
    rng = random.Random(1000 + seed if hidden else 6)
    cases = [_draw(rng, "bfloat16", False, SCALE), _draw(rng, "float16", True, SCALE)]
    return {"cases": cases + ([_draw(rng, "float16", True, OVERFLOW_SCALE)] if hidden else [])}


def probe(amp_step, inputs):
    """Run amp_step once per case on a fresh MLP; report the events in order and the numbers."""
    import contextlib
    import warnings

    import torch

    def run_case(drawn):
        model, log, losses, outputs = build_mlp(drawn["model"]), [], [], []
        params = list(model.parameters())
        for parameter in params:
            parameter.grad = torch.full_like(parameter, 0.5)  # left over from a previous step
        optimizer = torch.optim.SGD(params, lr=drawn["lr"])
        scaler = torch.amp.GradScaler("cpu", init_scale=drawn["init_scale"],
                                      enabled=drawn["scaler"])

        def loss_fn(logits, targets):
            losses.append(str((loss := torch.nn.functional.cross_entropy(logits, targets)).dtype))
            return loss

        def at_step(*args, **kwargs):  # the gradients the optimizer is about to use
            grads = [p.grad.double().flatten() for p in params if p.grad is not None]
            norm = torch.linalg.vector_norm(torch.cat(grads)) if grads else torch.tensor(0.0)
            return {"norm": float(norm) if torch.isfinite(norm) else None}

        def at_backward(*args, **kwargs):
            return {"autocast": torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled(
                "cuda"), "stale": any(p.grad is not None and bool((p.grad == 0.5).all())
                                      for p in params)}

        def autocast_made(self, *args, **kwargs):
            return {"module": type(self).__module__,
                    "device_type": str(kwargs.get("device_type", args[0] if args else None))}

        recorder = ForwardRecorder(model, log)
        model.register_forward_hook(lambda module, args, out: outputs.append(str(out.dtype)))
        spies = [Spy(torch.autograd, "backward", "backward", log, at_backward),
                 Spy(optimizer, "step", "optimizer.step", log, at_step),
                 Spy(torch.amp.autocast_mode.autocast, "__init__", "autocast", log, autocast_made),
                 Spy(torch.amp.GradScaler, "__init__", "new GradScaler", log)] + [
                     Spy(scaler, name, "scaler." + name, log)
                     for name in ("scale", "unscale_", "step", "update")]
        with contextlib.ExitStack() as stack, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated spellings are seen by the spies
            for spy in spies:
                stack.enter_context(spy)
            run = run_learner(amp_step, model, torch.tensor(drawn["features"]),
                              torch.tensor(drawn["labels"]), loss_fn, optimizer, scaler,
                              getattr(torch, drawn["dtype"]), drawn["max_norm"])
        recorder.remove()
        return {"error": run.error, "returned": describe(run.value), "log": log,
                "forwards": recorder.records, "outputs": outputs, "losses": losses,
                "backwards": spies[0].calls, "steps": spies[1].calls,
                "autocasts": spies[2].calls, "params": parameter_values(model)}

    return [run_case(drawn) for drawn in inputs["cases"]]


def _reference(drawn: dict) -> dict:
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


def _name(drawn: dict) -> str:
    if drawn["init_scale"] == OVERFLOW_SCALE:
        return "float16 whose scaled gradients overflow (the step must be skipped)"
    return f"{drawn['dtype']} with {'an enabled' if drawn['scaler'] else 'a disabled'} GradScaler"


def _success(inputs: dict) -> str:
    return ("amp_step() runs the forward pass under autocast in the given dtype, the loss in "
            "float32 and backward outside autocast, clips unscaled gradients, steps through the "
            "scaler and matches a float32 step, with: "
            f"{'; '.join(_name(drawn) for drawn in inputs['cases'])}.")


AUTOCAST = ("wrap the forward pass and the loss in `with torch.autocast(features.device.type, "
            "dtype=dtype):` and leave the model and the batch in float32.")
ORDER = ("call, in this order: scaler.scale(loss).backward(), scaler.unscale_(optimizer) once, "
         "clip_grad_norm_, scaler.step(optimizer), scaler.update().")
HALF = ("keep the model in float32 (no model.half() or model.to(dtype)): the scaler unscales "
        "float32 gradients, and autocast makes the float16 copies itself.")


def _from_scaler(fix: str):
    """A hint for errors the GradScaler raised (classified by where they arose, not by text)."""
    return lambda error: fix if "grad_scaler" in (error["raised_in"] or "") else None


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_amp_step(inputs, observations, hidden):
    for drawn, seen in zip(inputs["cases"], observations, strict=True):
        with case(_name(drawn)):
            _verify(drawn, seen, hidden)


def _verify(drawn: dict, seen: dict, hidden: bool) -> None:
    dtype, scaled, log = f"torch.{drawn['dtype']}", drawn["scaler"], seen["log"]
    where = f"With dtype={dtype} and {'an enabled' if scaled else 'a disabled'} GradScaler"
    expect_no_error(seen["error"], "amp_step(...)", where=where, hints={
        "RuntimeError": _from_scaler(ORDER), "AssertionError": _from_scaler(ORDER),
        "ValueError": _from_scaler(HALF)})
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
    reference, steps = _reference(drawn), seen["steps"]
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
    if not all(map(math.isfinite, after)) or math.dist(after, expected) > 0.1 * update + 1e-6:
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
