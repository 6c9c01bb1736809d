"""amp_step(): forward under autocast, backward outside it, unscale before clipping, scaler.step."""
from __future__ import annotations

import random

from ...probe import ForwardRecorder, Spy, build_mlp, describe, parameter_values, run_learner
from ..framework import case, check
from .amp_step_rules import OVERFLOW_SCALE, SCALE, reference_step, verify


def _draw(rng: random.Random, dtype: str, scaler: bool, init_scale: float) -> dict:
    def matrix(rows, cols, spread=0.5):
        return [[round(rng.uniform(-spread, spread), 4) for _ in range(cols)] for _ in range(rows)]
    spec = {"w1": matrix(16, 8), "b1": matrix(1, 16)[0], "w2": matrix(4, 16), "b2": [0.0] * 4}
    drawn = {"dtype": dtype, "scaler": scaler, "init_scale": init_scale, "model": spec, "lr": 0.5,
             "features": matrix(16, 8, 2.0), "labels": [rng.randrange(4) for _ in range(16)]}
    drawn["max_norm"] = round(reference_step(drawn)["norm"] / 2, 6)  # so that clipping bites
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


def _name(drawn: dict) -> str:
    if drawn["init_scale"] == OVERFLOW_SCALE:
        return "float16 whose scaled gradients overflow (the step must be skipped)"
    return f"{drawn['dtype']} with {'an enabled' if drawn['scaler'] else 'a disabled'} GradScaler"


def _success(inputs: dict) -> str:
    return ("amp_step() runs the forward pass under autocast in the given dtype, the loss in "
            "float32 and backward outside autocast, clips unscaled gradients, steps through the "
            "scaler and matches a float32 step, with: "
            f"{'; '.join(_name(drawn) for drawn in inputs['cases'])}.")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_amp_step(inputs, observations, hidden):
    for drawn, seen in zip(inputs["cases"], observations, strict=True):
        with case(_name(drawn)):
            verify(drawn, seen, hidden)
