"""pick_device(): CUDA, else MPS, else the CPU, asked each time it is called."""
from __future__ import annotations

import random

from ...probe import SimulatedMachine, describe, run_learner
from .. import machines
from ..framework import check, expect_no_error, fail, is_kind, where_in_code

VISIBLE = [machines.CUDA, machines.CPU]
HIDDEN = [machines.CUDA, machines.MPS, machines.CPU, machines.CUDA_AND_MPS, machines.TWO_GPUS,
          machines.XPU]
# Machine -> the device types a right answer returns there, the exercise's rule first. On an
# XPU machine the rule (CUDA, else MPS, else the CPU) gives the CPU; an answer that asks
# torch.accelerator finds the XPU, which is right too.
EXPECTED = {machines.CUDA["name"]: ("cuda",), machines.MPS["name"]: ("mps",),
            machines.CPU["name"]: ("cpu",), machines.CUDA_AND_MPS["name"]: ("cuda",),
            machines.TWO_GPUS["name"]: ("cuda",), machines.XPU["name"]: ("cpu", "xpu")}


def make_inputs(seed: int, hidden: bool) -> dict:
    chosen = list(HIDDEN if hidden else VISIBLE)
    if hidden:
        random.Random(seed).shuffle(chosen)
    return {"machines": chosen}


def probe(pick_device, inputs):
    """Call pick_device() on each simulated machine; record what it asked and returned."""
    results = []
    for spec in inputs["machines"]:
        with SimulatedMachine(spec) as machine:
            run = run_learner(pick_device)
        results.append({"returned": describe(run.value), "error": run.error,
                        "asked": machine.queries})
    return results


def _success(inputs: dict) -> str:
    tested = "; ".join(f"{spec['name']} → {' or '.join(EXPECTED[spec['name']])}"
                       for spec in inputs["machines"])
    return f"pick_device() returns the right device on each simulated machine: {tested}."


FALLBACK = ("every path must end in a `return torch.device(...)`: add the missing fallback, "
            "`return torch.device('cpu')`, after the `if` tests (in the source's snippet the "
            "`else:` was missing).")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_pick_device(inputs, observations, hidden):
    for spec, result in zip(inputs["machines"], observations, strict=True):
        where = f"On {spec['name']} (simulated)"
        accepted = EXPECTED[spec["name"]]
        expected = accepted[0]
        error = result["error"]
        if is_kind(error, "NameError"):  # UnboundLocalError too: no branch assigned it
            fail(f"{where}, pick_device() raised {error['type']}{where_in_code(error)}: no "
                 "branch assigned the variable it returns on this machine.", FALLBACK)
        expect_no_error(error, "pick_device()", where=where)
        returned = result["returned"]
        if returned["type"] == "NoneType":
            fail(f"{where}, pick_device() returned None.", FALLBACK)
        if returned["type"] != "device":
            fail(f"{where}, pick_device() returned {returned['type']!r}, not a torch.device.",
                 "return `torch.device('cuda')` (a device object), not a string or a bool.")
        if returned["device_type"] in accepted and returned["index"] in (None, 0):
            continue
        if not result["asked"]:
            fail(f"{where}, pick_device() returned {returned['text']!r} without asking torch "
                 "anything: it returns a device chosen before it was called (such as the "
                 "notebook's `device`), so it cannot notice which machine it runs on.",
                 "inside the function, ask torch.cuda.is_available(), then "
                 "torch.backends.mps.is_available(), every time it is called.")
        if returned["device_type"] not in accepted:
            overwritten = (" An unconditional `torch.device('cpu')` after the tests overwrites "
                           "the choice: make the CPU the fallback only."
                           if returned["device_type"] == "cpu" else "")
            fail(f"{where}, pick_device() returned {returned['text']!r}; it should pick "
                 f"{expected!r}.{overwritten}",
                 "test torch.cuda.is_available() first, then torch.backends.mps.is_available(), "
                 "and fall back to torch.device('cpu').")
        fail(f"{where}, pick_device() returned {returned['text']!r}.",
             "return the default device of its type (`torch.device('cuda')`, index 0 or none).")
