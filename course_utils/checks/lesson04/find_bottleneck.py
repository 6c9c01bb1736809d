"""find_bottleneck(loader, step, device): time the wait for each batch and each step; name the slower."""
from __future__ import annotations

import random

from ...probe import SimulatedMachine, Spy, run_learner
from .. import machines
from ..framework import CheckFailure, check, expect_no_error, fail

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

    # Two trials per case: a correct answer fails only if the machine disturbs both.
    return [[observe(case) for _ in range(2)] for case in inputs["cases"]]


def _success(inputs: dict) -> str:
    tested = "; ".join(f"{c['machine']['name']} (loader {c['loader_ms']} ms, model "
                       f"{c['model_ms']} ms per batch)" for c in inputs["cases"])
    return ("find_bottleneck() times the wait for each batch and each step apart, waits for the "
            f"device before stopping the clock, and names the slower stage, on: {tested}.")


def _near(value: float, truth: float, share: float = 0.4, slack: float = 0.002) -> bool:
    """Within ``share`` and ``slack`` seconds: the clocks of the check and the answer differ."""
    return abs(value - truth) <= share * truth + slack


def _cause_of_a_free_step(log: list[str]) -> str:
    if "sync" not in log:
        return "it never waited for the device it was given"
    if all(log[i + 1:i + 2] == ["sync"] for i, event in enumerate(log) if event == "step"):
        return "it waits for the device only after reading the clock"
    return "it waits for the device before each step, but not after it"


def _verify_trial(case: dict, seen: dict, where: str, hidden: bool) -> None:
    """Fail (cause, then fix) when one trial's answer is wrong."""
    expect_no_error(seen["error"], "find_bottleneck()", where=where, hints={
        "RuntimeError": None if case["machine"]["gpus"] else "torch.cuda.synchronize() fails "
        "where there is no CUDA GPU: wait in a way that works on every device, "
        "synchronize(device) from course_utils (it does nothing on the CPU)."})
    if seen["reported"] is None or not seen["loads"]:
        fail(f"{where}, find_bottleneck() returned {seen['type']}"
             + ("" if seen["loads"] else " without taking a batch from the loader") + ".",
             "time each batch of the loader and each step, and return a tuple (culprit, "
             "loader_seconds, model_seconds): 'loader' or 'model', and two means per batch.")
    culprit, loader_s, model_s = seen["reported"]
    work = sum(seen["work"]) / len(seen["work"])  # per step, on the device
    truth = {"model": work + seen["late"],  # a synchronised clock also sees the wait overshoot
             "loader": sum(seen["loads"]) / len(seen["loads"])}
    straight = _near(loader_s, truth["loader"]) and _near(model_s, truth["model"])
    if not straight and _near(loader_s, truth["model"], 0.25, 0) \
            and _near(model_s, truth["loader"], 0.25, 0):
        fail(f"{where}, find_bottleneck() returned the model's time where the loader's belongs, "
             "and the other way round.",
             "return (culprit, loader_seconds, model_seconds), in this order.")
    if case["device"] != "cpu" and model_s < 0.5 * work:
        busy = "longer" if hidden else f"{case['model_ms']} ms"
        fail(f"{where}, find_bottleneck() measured almost no time per step, yet the device was "
             f"busy {busy} per step: {_cause_of_a_free_step(seen['log'])}. A GPU step returns "
             "as soon as its work is queued, so the clock stopped too early.",
             "call synchronize(device), with the function's `device` argument, after "
             "step(batch) and before reading the clock.")
    for stage, value in (("model", model_s), ("loader", loader_s)):
        if _near(value, truth[stage]):
            continue
        if stage == "loader" and _near(value, truth["loader"] + truth["model"]):
            fail(f"{where}, the loader time find_bottleneck() reported includes the step.",
                 "stop the loader's clock as soon as the batch arrives, and start the step's "
                 "clock then.")
        if _near(value, truth[stage] * len(seen["loads"])):
            fail(f"{where}, find_bottleneck() reported the {stage} time summed over "
                 f"{len(seen['loads'])} batches.",
                 "divide each total by the number of batches: return means per batch.")
        took = "" if hidden else f" (it took about {case[stage + '_ms']} ms)"
        fail(f"{where}, find_bottleneck()'s {stage} time per batch is far from what the check "
             f"measured{took}.", "time next(batch) from the loader and step(batch) separately, "
             "with time.perf_counter(), and return the mean of each per batch.")
    slower = "loader" if loader_s > model_s else "model"
    if culprit != slower:
        fail(f"{where}, find_bottleneck() named {culprit!r} as the bottleneck, but its own "
             f"measurements say the {slower} took longer per batch.",
             "return 'loader' or 'model': the stage that took longer per batch.")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_find_bottleneck(inputs, observations, hidden):
    for case, trials in zip(inputs["cases"], observations, strict=True):
        where = f"On {case['machine']['name']} (simulated, device {case['device']!r})"
        failures = []
        for seen in trials:  # one right trial is enough: the machine may disturb the other
            try:
                _verify_trial(case, seen, where, hidden)
                break
            except CheckFailure as failure:
                failures.append(failure)
        else:
            raise failures[0]
