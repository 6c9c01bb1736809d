"""amp_settings(device): bfloat16 where the hardware has it, else float16 with a GradScaler."""
from __future__ import annotations

import random

from ...probe import SimulatedMachine, run_learner, type_name
from .. import machines
from ..framework import check, expect_no_error, fail

T4 = machines.machine("a cloud VM with one Tesla T4", {"cuda": ["T4"]})
# Mixed servers: the device asked about is cuda:1, made the current GPU (as get_device() does).
T4_THEN_A100 = machines.machine("a server with a Tesla T4 as cuda:0 and an A100 as cuda:1",
                                {"cuda": ["T4", "A100"]})
A100_THEN_T4 = machines.machine("a server with an A100 as cuda:0 and a Tesla T4 as cuda:1",
                                {"cuda": ["A100", "T4"]})
# The CPU of a GPU machine: precision follows `device`, not what the machine has.
VISIBLE = [(machines.CUDA, "cuda"), (T4, "cuda"), (machines.CPU, "cpu"), (T4, "cpu"),
           (T4_THEN_A100, "cuda:1")]
NEWER_GPUS = ["A100", "RTX 4090", "B200"]


def make_inputs(seed: int, hidden: bool) -> dict:
    chosen = list(VISIBLE)
    if hidden:
        rng = random.Random(seed)
        gpu = rng.choice(NEWER_GPUS)
        newer = machines.machine(f"a machine with one {gpu}", {"cuda": [gpu]})
        chosen = [(newer, "cuda"), (T4, "cuda"),
                  (machines.MPS, "mps"), (machines.CPU, "cpu"), (machines.CUDA_AND_MPS, "mps"),
                  (rng.choice([T4, machines.CUDA]), "cpu"), (A100_THEN_T4, "cuda:1")]
        rng.shuffle(chosen)
    return {"cases": [{"machine": spec, "device": device} for spec, device in chosen]}


def probe(amp_settings, inputs):
    """Call amp_settings(device) on each simulated machine; report the dtype and the scaler."""
    import warnings

    import torch

    results = []
    for case in inputs["cases"]:
        device = torch.device(case["device"])
        with SimulatedMachine(case["machine"]) as machine, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecations are seen in the scaler's class
            if device.index is not None:  # the chosen GPU is the current one, as get_device()
                torch.cuda.set_device(device.index)  # leaves it
            machine.queries.clear()
            run = run_learner(amp_settings, device)
        value = run.value
        pair = isinstance(value, (tuple, list)) and len(value) == 2
        dtype, scaler = value if pair else (None, None)
        facts = {"type": type_name(scaler)}
        if isinstance(scaler, torch.amp.GradScaler):
            facts.update(module=type(scaler).__module__, enabled=bool(scaler.is_enabled()),
                         device=str(getattr(scaler, "_device", None)))
        results.append({"error": run.error, "returned": type_name(value), "pair": pair,
                        "dtype": str(dtype) if isinstance(dtype, torch.dtype) else None,
                        "dtype_type": type_name(dtype), "scaler": facts,
                        "asked": machine.queries})
    return results


def _gpu(case: dict) -> machines.GpuSpec | None:
    """The GPU ``case["device"]`` names, or None for the CPU and MPS."""
    kind, _, index = case["device"].partition(":")
    return machines.gpus(case["machine"])[int(index or 0)] if kind == "cuda" else None


def _expected(case: dict) -> str:
    gpu = _gpu(case)
    return "torch.float16" if gpu and gpu["major"] < 8 else "torch.bfloat16"


def _success(inputs: dict) -> str:
    def names(dtype):
        return "; ".join(f"{case['machine']['name']} ({case['device']})"
                         for case in inputs["cases"] if _expected(case) == dtype)
    return (f"amp_settings() picks bfloat16 with a disabled GradScaler on: "
            f"{names('torch.bfloat16')}; float16 with an enabled GradScaler on: "
            f"{names('torch.float16')} (simulated).")


RULE = ("choose bfloat16 unless the device is a CUDA GPU without bfloat16 units (compute "
        "capability below 8.0): ask torch.cuda.is_bf16_supported(including_emulation=False).")


def _expect_dtype(case: dict, seen: dict, where: str, others: list) -> None:
    """The dtype ``device`` needs, with what the other cases show about a wrong one."""
    device, expected, gpu = case["device"], _expected(case), _gpu(case)
    mps_float16 = device == "mps" and seen["dtype"] == "torch.float16"  # macOS < 14: right
    if seen["dtype"] == expected or mps_float16:
        return
    gpus = machines.gpus(case["machine"])
    if gpu is None and gpus:  # the CPU or MPS of a machine that has a GPU
        alone = [o["dtype"] for c, o in others if c["device"] == device and not
                 machines.gpus(c["machine"])]
        fail(f"{where} chose {seen['dtype'].removeprefix('torch.')} for {device!r}" + (
                 f" here, and bfloat16 for {device!r} on a machine without a GPU: it followed "
                 "the machine, not `device`." if "torch.bfloat16" in alone else
                 ": the machine has a CUDA GPU, but `device` is not on it."),
             "decide from device.type (and, for 'cuda', that GPU): "
             "`if device.type == 'cuda' and not ...`.")
    other = f" ({device}; cuda:0 is the {gpus[0]['name']})" if gpu and len(gpus) > 1 else ""
    if expected == "torch.bfloat16":
        what = (f"the {gpu['name']} has bfloat16 units{other}" if gpu else
                "autocast on the CPU is made for bfloat16")
        fail(f"{where} chose float16, but {what}: bfloat16 keeps float32's range, so "
             "it needs no GradScaler.", RULE + (" Ask about `device` itself, e.g. "
                                                "torch.cuda.get_device_capability(device)."
                                                if other else ""))
    emulated = "torch.cuda.is_bf16_supported" in seen["asked"]
    fail(f"{where} chose bfloat16, but a T4 (compute capability 7.5) has no bfloat16 "
         f"units{other}: bfloat16 would be emulated, slowly." + (
             " torch.cuda.is_bf16_supported() says True here because by default it "
             "counts emulation." if emulated and not other else ""),
         "ask torch.cuda.is_bf16_supported(including_emulation=False) (or the compute "
         "capability of `device`) and use float16 with an enabled GradScaler on such GPUs.")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_amp_settings(inputs, observations, hidden):
    others = list(zip(inputs["cases"], observations, strict=True))
    for case, seen in others:
        device = case["device"]
        call = f"amp_settings(torch.device('{device}'))"
        expect_no_error(seen["error"], call, where=f"On {case['machine']['name']} (simulated)")
        where = f"On {case['machine']['name']} (simulated), {call}"
        if not seen["pair"]:
            fail(f"{where} returned {seen['returned']!r}, not a pair (dtype, scaler).",
                 "end with `return dtype, scaler`.")
        if seen["dtype"] is None:
            fail(f"{where} returned {seen['dtype_type']!r} as the dtype.",
                 "return the dtype object (torch.bfloat16 or torch.float16), not a string.")
        if seen["dtype"] not in ("torch.float16", "torch.bfloat16"):
            fail(f"{where} chose {seen['dtype']}: autocast computes in float16 or bfloat16.",
                 RULE)
        _expect_dtype(case, seen, where, others)
        scaler, needed = seen["scaler"], seen["dtype"] == "torch.float16"
        if scaler["type"] == "NoneType" or "enabled" not in scaler:
            fail(f"{where} returned {scaler['type']!r} as the scaler.",
                 "always return a torch.amp.GradScaler, with enabled=False where no scaling is "
                 "needed: the training step can then call its methods unconditionally.")
        if scaler["module"].startswith(("torch.cuda.amp", "torch.cpu.amp")):
            fail(f"{where} built its scaler with the deprecated {scaler['module']} (it warns "
                 "with a FutureWarning).",
                 "use torch.amp.GradScaler(device.type, enabled=...), the device-agnostic one.")
        if scaler["enabled"] and not needed:
            fail(f"{where} returned an enabled GradScaler with bfloat16: pointless, because "
                 "bfloat16's exponent range is float32's, so gradients do not underflow.",
                 "create it with enabled=(dtype == torch.float16).")
        if needed and not scaler["enabled"]:
            fail(f"{where} chose float16 with a disabled GradScaler: small gradients underflow "
                 "to zero in float16 unless the loss is scaled.",
                 "create the scaler with enabled=True when the dtype is float16.")
        kind = device.split(":")[0]
        if needed and scaler["device"] != kind:
            fail(f"{where} returned a GradScaler for {scaler['device']!r}, not {kind!r}.",
                 "pass the device's type: torch.amp.GradScaler(device.type, ...).")
