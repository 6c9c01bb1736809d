"""gpu_inventory(): one dict per CUDA GPU with index, name, memory_gib, capability, sm_count."""
from __future__ import annotations

import random

from ...lab.args import is_real
from ...probe import SimulatedMachine, describe, run_learner
from .. import machines
from ..framework import a, check, expect_no_error, expect_type, fail

KEYS = ("index", "name", "memory_gib", "capability", "sm_count")


def make_inputs(seed: int, hidden: bool) -> dict:
    if not hidden:
        return {"machines": [machines.machine("a server with an H100 and an A100",
                                              {"cuda": ["H100", "A100"]}), machines.CPU]}
    rng = random.Random(seed)
    chosen = [rng.sample(sorted(machines.GPUS), k) for k in (1, 3)]
    return {"machines": [machines.machine(f"a machine with {', '.join(gpus)}", {"cuda": gpus})
                         for gpus in chosen] + [machines.CPU]}


def probe(gpu_inventory, inputs):
    """Call gpu_inventory() on each simulated machine and report what it returned."""
    results = []
    for spec in inputs["machines"]:
        with SimulatedMachine(spec):
            run = run_learner(gpu_inventory)
        value = run.value
        results.append({"returned": describe(value, max_values=16), "error": run.error,
                        "entries": value if isinstance(value, list) and all(
                            isinstance(entry, dict) for entry in value) else None})
    return results


def _success(inputs: dict) -> str:
    tested = "; ".join(spec["name"] for spec in inputs["machines"])
    return (f"gpu_inventory() reports each GPU's index, name, memory, capability and SMs, "
            f"in order, on: {tested}.")


def _expected(index: int, gpu: dict) -> dict:
    return {"index": index, "name": gpu["name"], "memory_gib": gpu["total_memory"] / 2**30,
            "capability": f"{gpu['major']}.{gpu['minor']}",
            "sm_count": gpu["multi_processor_count"]}


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_gpu_inventory(inputs, observations, hidden):
    for spec, result in zip(inputs["machines"], observations, strict=True):
        gpus = machines.gpus(spec)
        where = f"On {spec['name']} (simulated)"
        expect_no_error(result["error"], "gpu_inventory()", where=where, hints={
            "Exception": None if gpus else
            "with no GPU, torch.cuda.device_count() is 0: loop over its range and return [] "
            "without asking for device properties."})
        expect_type(result["returned"], "list", f"{where}, what gpu_inventory() returned",
                    "build and return a list with one dict per GPU.")
        entries = result["entries"]
        if entries is None:
            fail(f"{where}, gpu_inventory() returned a list whose items are not all dicts.",
                 f"append one dict per GPU, with the keys {list(KEYS)}.")
        if len(entries) != len(gpus):
            listed = [entry.get("index") for entry in entries]
            missing = [index for index in range(len(gpus)) if index not in listed]
            fail(f"{where}, gpu_inventory() returned {len(entries)} entries for {len(gpus)} "
                 f"GPU(s), the number torch.cuda.device_count() reports there" + (
                     f": no entry has the index {', '.join(map(str, missing))}, the indices "
                     f"being 0 to {len(gpus) - 1}." if missing and len(entries) else "."),
                 "loop over range(torch.cuda.device_count()): one dict per GPU, [] with none.")
        for index, (entry, gpu) in enumerate(zip(entries, gpus, strict=True)):
            if set(entry) != set(KEYS):
                fail(f"{where}, entry {index} has the keys {sorted(entry)}.",
                     f"give each GPU exactly the keys {list(KEYS)}.")
            expected = _expected(index, gpu)
            if entry["index"] != index or entry["name"] != gpu["name"]:
                fail(f"{where}, entry {index} is {entry['name']!r} at index {entry['index']!r}.",
                     "ask torch.cuda.get_device_properties(i) for GPU i, in index order.")
            memory = entry["memory_gib"]
            if not is_real(memory):
                fail(f"{where}, GPU {index}'s memory_gib is {a(type(memory).__name__)}.",
                     "use the number props.total_memory / 2**30.")
            if abs(memory - expected["memory_gib"]) > 0.01:
                gigabytes = abs(memory - gpu["total_memory"] / 1e9) < 0.01
                fail(f"{where}, GPU {index}'s memory_gib is {memory!r}.",
                     "divide bytes by 2**30 (GiB), not by 1e9 (GB)." if gigabytes else
                     "use props.total_memory (bytes) / 2**30.")
            if entry["capability"] != expected["capability"]:
                fail(f"{where}, GPU {index}'s capability is {entry['capability']!r}.",
                     "write it as the string f'{props.major}.{props.minor}', e.g. '8.0'.")
            if entry["sm_count"] != expected["sm_count"]:
                fail(f"{where}, GPU {index}'s sm_count is {entry['sm_count']!r}.",
                     "use props.multi_processor_count: the number of streaming multiprocessors.")
