"""find_bottleneck(loader, step, device): time the wait for each batch and each step apart;
name the slower stage."""
from __future__ import annotations

import random

from ...probe import SimulatedClock, SimulatedMachine, run_learner
from .. import machines
from ..framework import case, check, expect_not_a_stub
from .find_bottleneck_rules import verify

VISIBLE = [{"machine": machines.CUDA, "device": "cuda", "loader_ms": 1, "model_ms": 10,
            "batches": 4},
           {"machine": machines.CPU, "device": "cpu", "loader_ms": 10, "model_ms": 1,
            "batches": 4},
           {"machine": machines.CUDA, "device": "cpu", "loader_ms": 3, "model_ms": 1,
            "batches": 4}]
# Where a device argument matters: a second GPU, and CPU work on a machine with a GPU.
HIDDEN = [(machines.CUDA, "cuda"), (machines.TWO_GPUS, "cuda:1"), (machines.MPS, "mps"),
          (machines.CPU, "cpu"), (machines.CUDA, "cpu")]


def make_inputs(seed: int, hidden: bool) -> dict:
    """Per case: a machine, the device the step runs on, and each stage's cost per batch."""
    if not hidden:
        return {"cases": VISIBLE}
    rng = random.Random(seed)
    slower = ["loader", "model"] * 2 + [rng.choice(["loader", "model"])]  # both culprits
    rng.shuffle(slower)
    cases = []
    for (spec, device), stage in zip(rng.sample(HIDDEN, len(HIDDEN)), slower, strict=True):
        slow, fast = rng.randint(8, 12), rng.randint(1, 3)
        cases.append({"machine": spec, "device": device, "batches": rng.randint(4, 6),
                      "loader_ms": slow if stage == "loader" else fast,
                      "model_ms": slow if stage == "model" else fast})
    return {"cases": cases}


def probe(find_bottleneck, inputs):
    """Run find_bottleneck() on a simulated clock, with a loader and a step of known cost: on a
    GPU or a Mac the step only queues its work, which the device runs later."""
    import torch

    def observe(case):
        log = []
        clock = SimulatedClock(log, functions=[find_bottleneck])
        device = torch.device(case["device"])
        queue = f"cuda:{device.index or 0}" if device.type == "cuda" else device.type

        class Loader:
            def __len__(self):
                return case["batches"]

            def __iter__(self):
                for _ in range(case["batches"]):
                    clock.cpu(case["loader_ms"] / 1e3)
                    log.append({"event": "load"})
                    yield torch.zeros(2, 4), torch.zeros(2, dtype=torch.int64)

        def step(batch):
            log.append({"event": "step"})
            clock.cpu(2e-5)  # the Python side of a step
            if device.type == "cpu":
                clock.cpu(case["model_ms"] / 1e3)
            else:
                clock.launch(queue, case["model_ms"] / 1e3)

        with SimulatedMachine(case["machine"]), clock:
            run = run_learner(find_bottleneck, Loader(), step, device)
        try:
            value = run.value
            reported = [str(value[0]), float(value[1]), float(value[2])] \
                if isinstance(value, (tuple, list)) and len(value) == 3 else None
        except (TypeError, ValueError, RuntimeError):
            reported = None
        return {"error": run.error, "stopped": run.stopped, "type": type(run.value).__name__,
                "reported": reported, "queue": queue, "log": log}

    return [observe(case) for case in inputs["cases"]]


def _success(inputs: dict) -> str:
    tested = "; ".join(f"{c['machine']['name']}, device {c['device']} (loader {c['loader_ms']} "
                       f"ms, model {c['model_ms']} ms per batch)" for c in inputs["cases"])
    return ("find_bottleneck() times the wait for each batch and each step apart, waits for the "
            f"device before stopping the clock, and names the slower stage, on: {tested}.")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_find_bottleneck(inputs, observations, hidden):
    expect_not_a_stub([seen["error"] for seen in observations], "find_bottleneck()")
    for run, seen in zip(inputs["cases"], observations, strict=True):
        with case(f"{run['device']} on {run['machine']['name']}"):
            verify(run, seen, hidden)
