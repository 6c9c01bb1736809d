"""amp_step(): forward under autocast, backward outside it, unscale before clipping, scaler.step."""
from __future__ import annotations

import random

from ...probe import (
    ForwardRecorder,
    SimulatedMachine,
    Spy,
    build_mlp,
    describe,
    parameter_values,
    run_learner,
)
from .. import machines
from ..framework import case, check
from .amp_step_rules import CALLS, OVERFLOW_SCALE, SCALE, call_where, reference_steps, verify_call
from .amp_step_update_rules import expect_the_step

# Every case runs on a simulated machine, the batch on its CPU: bfloat16 on one with a GPU, where
# a step that picks autocast's device from the machine (torch.cuda.is_available()) instead of
# the data autocasts nothing; float16 on one without, where a step that uses the scaler only
# on a GPU machine never scales. The verdict is then the same on any grading machine.
GPU_MACHINE = machines.CUDA


def _draw(rng: random.Random, dtype: str, scaler: bool, init_scale: float) -> dict:
    def matrix(rows, cols, spread=0.5):
        return [[round(rng.uniform(-spread, spread), 4) for _ in range(cols)] for _ in range(rows)]
    spec = {"w1": matrix(16, 8), "b1": matrix(1, 16)[0], "w2": matrix(4, 16), "b2": [0.0] * 4}
    drawn = {"dtype": dtype, "scaler": scaler, "init_scale": init_scale, "model": spec, "lr": 0.5,
             "features": matrix(16, 8, 2.0), "labels": [rng.randrange(4) for _ in range(16)],
             "machine": GPU_MACHINE if dtype == "bfloat16" else machines.CPU}
    # Half the smaller gradient norm of the CALLS steps, so that clipping bites in each.
    drawn["max_norm"] = round(min(step["norm"] for step in reference_steps(drawn)) / 2, 6)
    return drawn


def make_inputs(seed: int, hidden: bool) -> dict:
    rng = random.Random(1000 + seed if hidden else 6)
    cases = [_draw(rng, "bfloat16", False, SCALE), _draw(rng, "float16", True, SCALE)]
    return {"cases": cases + ([_draw(rng, "float16", True, OVERFLOW_SCALE)] if hidden else []),
            "calls": CALLS}


def probe(amp_step, inputs):
    """Run amp_step twice per case (one model, optimizer and scaler, as a training loop does);
    report, per call, the events in order and the numbers."""
    import contextlib
    import sys
    import warnings

    import torch

    def call_text():  # the source of the call that made this autocast (outside torch)
        import linecache

        frame = sys._getframe(3)  # past this function, the spy's record and the spy
        while frame and any(part in frame.f_code.co_filename for part in ("/torch/", "contextlib")):
            frame = frame.f_back
        if frame is None:
            return ""
        positions = list(getattr(frame.f_code, "co_positions", list)())  # 3.11+: the whole call
        first, last = positions[frame.f_lasti // 2][:2] if positions else (None, None)
        lines = range(first or frame.f_lineno, (last or first or frame.f_lineno) + 1)
        return " ".join(linecache.getline(frame.f_code.co_filename, n).strip() for n in lines)

    def run_case(drawn):
        model = build_mlp(drawn["model"])
        params = list(model.parameters())
        optimizer = torch.optim.SGD(params, lr=drawn["lr"])
        scaler = torch.amp.GradScaler("cpu", init_scale=drawn["init_scale"],
                                      enabled=drawn["scaler"])
        features, labels = torch.tensor(drawn["features"]), torch.tensor(drawn["labels"])
        return [one_call(drawn, model, params, optimizer, scaler, features, labels)
                for _ in range(inputs["calls"])]

    def one_call(drawn, model, params, optimizer, scaler, features, labels):
        log, losses, outputs = [], [], []

        def grad_norm(*args, **kwargs):  # of the gradients the optimizer would use now
            grads = [p.grad.double().flatten() for p in params if p.grad is not None]
            norm = torch.linalg.vector_norm(torch.cat(grads)) if grads else torch.tensor(0.0)
            return {"norm": float(norm) if torch.isfinite(norm) else None}

        def loss_fn(logits, targets):
            losses.append(str((loss := torch.nn.functional.cross_entropy(logits, targets)).dtype))
            return loss

        def at_backward(*args, **kwargs):
            return {"autocast": torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled(
                "cuda"), "stale": any(p.grad is not None and bool(p.grad.ne(0).any())
                                      for p in params)}

        def autocast_made(self, *args, **kwargs):
            return {"module": type(self).__module__, "call": call_text(),
                    "device_type": str(kwargs.get("device_type", args[0] if args else None))}

        recorder = ForwardRecorder(model, log)
        hook = model.register_forward_hook(lambda module, a, out: outputs.append(str(out.dtype)))
        spies = [Spy(torch.autograd, "backward", "backward", log, at_backward),
                 Spy(optimizer, "step", "optimizer.step", log, grad_norm),
                 Spy(torch.amp.autocast_mode.autocast, "__init__", "autocast", log, autocast_made),
                 Spy(torch.nn.utils, "clip_grad_norm_", "clip", log, grad_norm),
                 Spy(torch.amp.GradScaler, "__init__", "new GradScaler", log)] + [
                     Spy(owner, "zero_grad", "zero_grad", log) for owner in (optimizer, model)] + [
                     Spy(scaler, name, "scaler." + name, log)
                     for name in ("scale", "unscale_", "step", "update")]
        with contextlib.ExitStack() as stack, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated spellings are seen by the spies
            stack.enter_context(SimulatedMachine(drawn["machine"]))
            for spy in spies:
                stack.enter_context(spy)
            run = run_learner(amp_step, model, features, labels, loss_fn, optimizer, scaler,
                              getattr(torch, drawn["dtype"]), drawn["max_norm"])
        recorder.remove()
        hook.remove()
        return {"error": run.error, "returned": describe(run.value), "log": log,
                "forwards": recorder.records, "outputs": outputs, "losses": losses,
                "backwards": spies[0].calls, "steps": spies[1].calls,
                "autocasts": spies[2].calls, "clips": spies[3].calls,
                "params": parameter_values(model)}

    return [run_case(drawn) for drawn in inputs["cases"]]


def _name(drawn: dict) -> str:
    if drawn["init_scale"] == OVERFLOW_SCALE:
        return "float16 whose scaled gradients overflow (the step must be skipped)"
    machine = drawn["machine"]
    where = f" ({machine['name']}, the batch on its CPU)" if machines.gpus(machine) else ""
    return (f"{drawn['dtype']} with {'an enabled' if drawn['scaler'] else 'a disabled'} "
            f"GradScaler{where}")


def _success(inputs: dict) -> str:
    return (f"amp_step(), called {inputs['calls']} times with the same model, optimizer and "
            "scaler, runs the forward pass under autocast for the batch's device in the given "
            "dtype, the loss in float32 and backward outside autocast, clips unscaled gradients, "
            "steps through the scaler and matches float32 steps, with: "
            f"{'; '.join(_name(drawn) for drawn in inputs['cases'])}.")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_amp_step(inputs, observations, hidden):
    for drawn, calls in zip(inputs["cases"], observations, strict=True):
        with case(_name(drawn)):
            for index, seen in enumerate(calls):  # each step from the weights the last one left
                verify_call(drawn, seen, call_where(drawn, index))
                expect_the_step(drawn, seen, calls[index - 1]["params"] if index else None,
                                call_where(drawn, index), hidden)
