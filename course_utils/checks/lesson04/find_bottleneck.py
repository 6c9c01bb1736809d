"""find_bottleneck(loader, step, device): time the wait for each batch and each step apart;
name the slower stage."""
from __future__ import annotations

import random

from ...probe import SimulatedMachine, Spy, run_learner
from .. import machines
from ..framework import CheckFailure, check
from .find_bottleneck_rules import FAR_OFF, verify_trial

VISIBLE = [{"machine": machines.CUDA, "device": "cuda", "loader_ms": 1, "model_ms": 10,
            "batches": 4},
           {"machine": machines.CPU, "device": "cpu", "loader_ms": 10, "model_ms": 1,
            "batches": 4}]


def make_inputs(seed: int, hidden: bool) -> dict:
    if not hidden:
        return {"cases": VISIBLE}
    rng = random.Random(seed)
    chosen = [(machines.CUDA, "cuda", "model"), (machines.MPS, "mps", "loader"),
              (machines.CPU, "cpu", rng.choice(["loader", "model"]))]
    rng.shuffle(chosen)
    cases = []
    for spec, device, slower in chosen:
        slow, fast = rng.randint(8, 12), rng.randint(1, 2)
        cases.append({"machine": spec, "device": device, "batches": rng.randint(4, 5),
                      "loader_ms": slow if slower == "loader" else fast,
                      "model_ms": slow if slower == "model" else fast})
    return {"cases": cases}


def probe(find_bottleneck, inputs):
    """Run find_bottleneck() on a loader and a step of known cost (a GPU's is asynchronous)."""
    import time

    import torch

    def observe(case):
        log, loads, work, queue = [], [], [], {"until": 0.0, "late": []}
        gpu = case["device"] != "cpu"

        class Loader:
            def __len__(self):
                return case["batches"]

            def __iter__(self):
                for _ in range(case["batches"]):
                    started = time.perf_counter()
                    time.sleep(case["loader_ms"] / 1e3)
                    loads.append(time.perf_counter() - started)
                    log.append("load")
                    yield torch.zeros(2, 4), torch.zeros(2, dtype=torch.int64)

        def step(batch):
            log.append("step")
            started = time.perf_counter()
            if gpu:  # queue the work and return at once, as a GPU does
                queue["until"] = max(queue["until"], started) + case["model_ms"] / 1e3
                work.append(case["model_ms"] / 1e3)
            else:
                time.sleep(case["model_ms"] / 1e3)
                work.append(time.perf_counter() - started)

        def wait(original, *args, **kwargs):  # a synchronize returns when the queue is done
            value = original(*args, **kwargs)
            remaining = queue["until"] - time.perf_counter()
            if remaining > 0:
                time.sleep(remaining)
                queue["late"].append(time.perf_counter() - queue["until"])  # sleep overshoot
            return value

        with SimulatedMachine(case["machine"]), \
                Spy(torch.cuda, "synchronize", "sync", log, replacement=wait), \
                Spy(torch.mps, "synchronize", "sync", log, replacement=wait), \
                Spy(torch.accelerator, "synchronize", "sync", log, replacement=wait):
            run = run_learner(find_bottleneck, Loader(), step, torch.device(case["device"]))
        try:
            value = run.value
            reported = [str(value[0]), float(value[1]), float(value[2])] \
                if isinstance(value, (tuple, list)) and len(value) == 3 else None
        except (TypeError, ValueError, RuntimeError):
            reported = None
        return {"error": run.error, "type": type(run.value).__name__, "reported": reported,
                "log": log, "loads": loads, "work": work,
                "late": sum(queue["late"]) / len(queue["late"]) if queue["late"] else 0.0}

    # Three trials per case: a correct answer fails only if the machine disturbs all three.
    return [[observe(case) for _ in range(3)] for case in inputs["cases"]]


def _success(inputs: dict) -> str:
    tested = "; ".join(f"{c['machine']['name']} (loader {c['loader_ms']} ms, model "
                       f"{c['model_ms']} ms per batch)" for c in inputs["cases"])
    return ("find_bottleneck() times the wait for each batch and each step apart, waits for the "
            f"device before stopping the clock, and names the slower stage, on: {tested}.")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_find_bottleneck(inputs, observations, hidden):
    for case, trials in zip(inputs["cases"], observations, strict=True):
        where = f"On {case['machine']['name']} (simulated, device {case['device']!r})"
        failures = []
        for seen in trials:  # one right trial is enough: the machine may disturb the other
            try:
                verify_trial(case, seen, where, hidden)
                break
            except CheckFailure as failure:
                failures.append(failure)
        else:  # a mistake the answer makes every time before a time a busy machine disturbed
            raise min(failures, key=lambda failure: FAR_OFF in str(failure))
