"""Checks for lesson 00, "Is there a GPU?"."""
from __future__ import annotations

import random

from ._core import check, expect_no_probe_error, expect_one_result_per_case, fail


def _fail_if_not_implemented(error: str, what: str) -> None:
    """The released stub raises NotImplementedError: say so instead of 'read the traceback'."""
    if error.startswith("NotImplementedError"):
        expect_no_probe_error({"probe_error": error}, what)
from ._probe_support import describe, error_text, patched  # noqa: F401  (names the probes use)

# Simulated machines: what each availability function reports.
MACHINES = {
    "cuda": {"cuda": True, "mps": False, "expected": "cuda"},
    "mps": {"cuda": False, "mps": True, "expected": "mps"},
    "cpu": {"cuda": False, "mps": False, "expected": "cpu"},
    "cuda+mps": {"cuda": True, "mps": True, "expected": "cuda"},
}


def _machine_inputs(seed: int, hidden: bool) -> dict:
    names = list(MACHINES)
    if hidden:
        random.Random(seed).shuffle(names)
    else:
        names = ["cuda", "cpu"]
    return {"machines": [dict(MACHINES[name], name=name) for name in names]}


def probe_pick_device(pick_device, inputs):
    """Call pick_device() on each simulated machine and describe what it returns."""
    import torch

    results = []
    for machine in inputs["machines"]:
        accelerator = torch.device("cuda") if machine["cuda"] else (
            torch.device("mps") if machine["mps"] else None)
        with patched([
            (torch.cuda, "is_available", lambda m=machine: m["cuda"]),
            (torch.cuda, "device_count", lambda m=machine: 1 if m["cuda"] else 0),
            (torch.backends.mps, "is_available", lambda m=machine: m["mps"]),
            (torch.accelerator, "is_available", lambda a=accelerator: a is not None),
            (torch.accelerator, "current_accelerator",
             lambda check_available=False, a=accelerator: a),
            (torch.accelerator, "current_device_index", lambda: 0),
        ]):
            try:
                results.append(describe(pick_device()))
            except Exception as error:  # report the learner's error to verify()
                results.append({"error": error_text(error)})
    return {"results": results}


@check(success="pick_device() picks CUDA, then MPS, then the CPU.",
       make_inputs=_machine_inputs, probe=probe_pick_device)
def check_pick_device(inputs, observations):
    expect_no_probe_error(observations, "pick_device()")
    expect_one_result_per_case(inputs["machines"], observations["results"], "pick_device()")
    for machine, result in zip(inputs["machines"], observations["results"]):
        where = f"On a machine with CUDA={machine['cuda']} and MPS={machine['mps']}"
        if "error" in result:
            error = result["error"]
            _fail_if_not_implemented(error, "pick_device()")
            hint = ("every branch must assign `device`: add the missing `else: device = "
                    "torch.device('cpu')`." if "UnboundLocalError" in error or "NameError" in error
                    else "read the traceback of pick_device() on such a machine.")
            fail(f"{where}, pick_device() raised {error}.", hint)
        if result["type"] == "NoneType":
            fail(f"{where}, pick_device() returned None.",
                 "some branch ends without `return`: give every case, the CPU fallback "
                 "included, a `return torch.device(...)`.")
        if result["type"] != "device":
            fail(f"{where}, pick_device() returned a {result['type']}, not a torch.device.",
                 "return `torch.device('cuda')` (a device object), not a string or a bool.")
        if result["device_type"] != machine["expected"]:
            overwritten = (" only in a final `else:` (an unconditional `device = "
                           "torch.device('cpu')` after the `if` overwrites the choice)"
                           if result["device_type"] == "cpu" else "")
            fail(f"{where}, pick_device() returned {result['text']!r}; it should pick "
                 f"{machine['expected']!r}.",
                 "test torch.cuda.is_available() first, then torch.backends.mps.is_available(), "
                 f"and fall back to torch.device('cpu'){overwritten}.")
        if result["index"] not in (None, 0):
            fail(f"{where}, pick_device() returned {result['text']!r}.",
                 "use the default device (index 0 or no index).")


GPU_SPECS = [
    {"name": "NVIDIA H100 80GB HBM3", "total_memory": 85_045_231_616, "major": 9, "minor": 0,
     "multi_processor_count": 132},
    {"name": "NVIDIA A100-SXM4-40GB", "total_memory": 42_505_273_344, "major": 8, "minor": 0,
     "multi_processor_count": 108},
    {"name": "Tesla T4", "total_memory": 15_835_660_288, "major": 7, "minor": 5,
     "multi_processor_count": 40},
    {"name": "NVIDIA GeForce RTX 4090", "total_memory": 25_393_692_672, "major": 8, "minor": 9,
     "multi_processor_count": 128},
]


def _inventory_inputs(seed: int, hidden: bool) -> dict:
    if not hidden:
        return {"machines": [GPU_SPECS[:2], []]}
    rng = random.Random(seed)
    machines = [rng.sample(GPU_SPECS, k) for k in (1, 3)]
    machines.append([])
    return {"machines": machines}


def probe_gpu_inventory(gpu_inventory, inputs):
    """Call gpu_inventory() on simulated machines with the given GPUs."""
    import types

    import torch

    results = []
    for gpus in inputs["machines"]:
        def properties(device=None, gpus=gpus):
            # Accept what torch.cuda accepts: None, an int, "cuda:1", torch.device("cuda", 1).
            if device is None:
                index = 0
            elif isinstance(device, int):
                index = device
            else:
                index = torch.device(device).index or 0
            return types.SimpleNamespace(**gpus[index])

        with patched([
            (torch.cuda, "is_available", lambda g=gpus: len(g) > 0),
            (torch.cuda, "device_count", lambda g=gpus: len(g)),
            (torch.cuda, "get_device_properties", properties),
            (torch.cuda, "get_device_name", lambda index=None, p=properties: p(index).name),
        ]):
            try:
                value = gpu_inventory()
                results.append({"type": type(value).__name__,
                                "value": value if isinstance(value, list) else None})
            except Exception as error:  # report the learner's error to verify()
                results.append({"error": error_text(error)})
    return {"results": results}


KEYS = ("index", "name", "memory_gib", "capability", "sm_count")


@check(success="gpu_inventory() reports every GPU's name, memory, capability and SMs.",
       make_inputs=_inventory_inputs, probe=probe_gpu_inventory)
def check_gpu_inventory(inputs, observations):
    expect_no_probe_error(observations, "gpu_inventory()")
    expect_one_result_per_case(inputs["machines"], observations["results"], "gpu_inventory()")
    for gpus, result in zip(inputs["machines"], observations["results"]):
        where = f"On a machine with {len(gpus)} GPU(s)"
        if "error" in result:
            _fail_if_not_implemented(result["error"], "gpu_inventory()")
            hint = ("with no GPU, return [] before asking for device properties."
                    if not gpus else "read the traceback of gpu_inventory() on such a machine.")
            fail(f"{where}, gpu_inventory() raised {result['error']}.", hint)
        if result["type"] != "list":
            fail(f"{where}, gpu_inventory() returned a {result['type']}, not a list.",
                 "build and return a list with one dict per GPU.")
        value = result["value"]
        if len(value) != len(gpus):
            fail(f"{where}, gpu_inventory() returned {len(value)} entries.",
                 "loop over range(torch.cuda.device_count()): one dict per GPU, [] with none.")
        for index, (entry, spec) in enumerate(zip(value, gpus)):
            if not isinstance(entry, dict) or set(entry) != set(KEYS):
                got = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
                fail(f"{where}, entry {index} has keys {got}.",
                     f"give each GPU exactly the keys {list(KEYS)}.")
            expected = {
                "index": index,
                "name": spec["name"],
                "memory_gib": spec["total_memory"] / 2**30,
                "capability": f"{spec['major']}.{spec['minor']}",
                "sm_count": spec["multi_processor_count"],
            }
            if entry["index"] != index or entry["name"] != spec["name"]:
                fail(f"{where}, entry {index} is {entry['name']!r} at index {entry['index']!r}.",
                     "ask torch.cuda.get_device_properties(i) for GPU i, in order.")
            memory = entry["memory_gib"]
            if not isinstance(memory, (int, float)) or abs(memory - expected["memory_gib"]) > 0.01:
                hint = ("divide bytes by 2**30 (GiB), not 1e9 (GB)."
                        if isinstance(memory, (int, float))
                        and abs(memory - spec["total_memory"] / 1e9) < 0.01
                        else "use props.total_memory (bytes) / 2**30.")
                fail(f"{where}, GPU {index}'s memory_gib is {memory!r}.", hint)
            if entry["capability"] != expected["capability"]:
                fail(f"{where}, GPU {index}'s capability is {entry['capability']!r}.",
                     "write it as the string f'{props.major}.{props.minor}', e.g. '8.0'.")
            if entry["sm_count"] != expected["sm_count"]:
                fail(f"{where}, GPU {index}'s sm_count is {entry['sm_count']!r}.",
                     "use props.multi_processor_count: the number of streaming multiprocessors.")
