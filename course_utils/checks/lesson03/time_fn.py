"""time_fn(fn, device, warmup, repeats): warm up, synchronise after the work, return the median."""
from __future__ import annotations

import random

from ...probe import SimulatedClock, SimulatedMachine, describe, run_learner
from .. import machines
from ..framework import case, check, expect_not_a_stub
from .time_fn_rules import verify

VISIBLE = [(machines.CUDA, "cuda", [0.004, 0.003, 0.002, 0.0021, 0.0019, 0.05, 0.0022]),
           (machines.CPU, "cpu", [0.003, 0.001, 0.0012, 0.09, 0.0011, 0.0013, 0.0014]),
           (machines.CUDA, "cpu", [0.004, 0.002, 0.0029, 0.0031, 0.06, 0.0027, 0.0033])]
# Where the device argument matters: a Mac, a second GPU, CPU work on a machine with a GPU.
HIDDEN = [(machines.CUDA, "cuda"), (machines.MPS, "mps"), (machines.TWO_GPUS, "cuda:1"),
          (machines.CPU, "cpu"), (machines.CUDA, "cpu")]


def make_inputs(seed: int, hidden: bool) -> dict:
    """Per case: a machine, the device fn() runs on, and how long each call of fn() takes."""
    if not hidden:
        return {"cases": [_case(spec, device, 2, 5, list(work)) for spec, device, work in VISIBLE]}
    rng, cases = random.Random(seed), []
    for spec, device in rng.sample(HIDDEN, len(HIDDEN)):
        warmup, repeats = rng.randint(1, 4), rng.randint(4, 9)
        work = [round(rng.uniform(0.001, 0.005), 6) for _ in range(warmup + repeats)]
        work[warmup + rng.randrange(repeats)] = 0.05  # one slow call: mean and median differ
        timed = work[warmup:]
        fastest = timed.index(min(timed))
        middle = rng.randrange(1, repeats - 1)  # the fastest is neither the first nor the last
        timed[fastest], timed[middle] = timed[middle], timed[fastest]
        work[warmup:] = timed
        cases.append(_case(spec, device, warmup, repeats, work))
    return {"cases": cases}


def _case(spec: machines.MachineSpec, device: str, warmup: int, repeats: int,
          work: list[float]) -> dict:
    return {"machine": spec, "device": device, "warmup": warmup, "repeats": repeats,
            "work_s": work, "launch_s": 2e-5, "startup_s": 0.25,
            "queue": f"{device}:0" if device == "cuda" else device}


def probe(time_fn, inputs):
    """Run time_fn on simulated machines whose device runs fn()'s work later; log the order."""
    import numbers

    import torch

    def observe(run):
        log = []
        clock = SimulatedClock(log, functions=[time_fn])

        def fn():  # the first call pays for start-up; a device queues the work, the CPU does it
            calls = sum(event["event"] == "work" for event in log)
            clock.cpu(run["launch_s"] + (run["startup_s"] if calls == 0 else 0))
            work = run["work_s"][calls % len(run["work_s"])]
            if run["device"] == "cpu":
                clock.cpu(work)
            else:
                clock.launch(run["queue"], work)
            log.append({"event": "work"})

        with SimulatedMachine(run["machine"]), clock:
            outcome = run_learner(time_fn, fn, torch.device(run["device"]), run["warmup"],
                                  run["repeats"])
        value = outcome.value
        number = isinstance(value, numbers.Real) and not isinstance(value, bool)
        return {"returned": describe(value), "seconds": float(value) if number else None,
                "error": outcome.error, "stopped": outcome.stopped, "log": log}

    return [observe(run) for run in inputs["cases"]]


def _success(inputs: dict) -> str:
    tested = "; ".join(f"{run['device']} on {run['machine']['name']}" for run in inputs["cases"])
    return ("time_fn() warms up, synchronises the device between fn() and every clock reading "
            f"and returns the median time per call in seconds, on simulated machines: {tested}.")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_time_fn(inputs, observations, hidden):
    expect_not_a_stub([result["error"] for result in observations], "time_fn()")
    for run, result in zip(inputs["cases"], observations, strict=True):
        with case(f"{run['device']} on {run['machine']['name']}"):
            verify(run, result, hidden)
