"""Right alternatives: copied from tests/test_checks_lesson04.py, and own."""
from __future__ import annotations

import statistics
import time
import timeit
from time import perf_counter_ns

import torch

from course_utils import synchronize


def timed(loader, step, wait, clock=time.perf_counter, **fields):
    """(loader seconds, model seconds) per batch, with `wait(device_arg)` where the answer waits."""
    loads, steps = [], []
    asked = clock()
    for batch in loader:
        arrived = clock()
        wait("before")
        step(batch)
        wait("after")
        finished = clock()
        wait("late")
        loads.append(arrived - asked)
        steps.append(finished - arrived)
        asked = clock() if not fields.get("keep_asked") else arrived
    return loads, steps


def answer(*, where="after", device_of=lambda device: device, summarise=statistics.fmean,
           order=lambda culprit, loader, model: (culprit, loader, model), clock=time.perf_counter,
           decide=lambda loader, model: "loader" if loader > model else "model", **fields):
    """A find_bottleneck() built from its parts, so that each test changes one of them."""
    def find(loader, step, device):
        loads, steps = timed(loader, step, lambda moment: synchronize(device_of(device))
                             if moment == where else None, clock=clock, **fields)
        loader_s, model_s = summarise(loads), summarise(steps)
        return order(decide(loader_s, model_s), loader_s, model_s)
    return find


def find_bottleneck_with_next_and_accelerator(loader, step, device):
    """Right: iter/next by hand, torch.accelerator.synchronize for accelerators, time.time."""
    iterator, loads, steps = iter(loader), [], []
    while True:
        asked = time.time()
        try:
            batch = next(iterator)
        except StopIteration:
            break
        arrived = time.time()
        step(batch)
        if device.type != "cpu":
            torch.accelerator.synchronize(device)
        loads.append(arrived - asked)
        steps.append(time.time() - arrived)
    loader_s, model_s = sum(loads) / len(loads), sum(steps) / len(steps)
    return ("loader" if loader_s > model_s else "model"), loader_s, model_s


def find_bottleneck_with_ns_and_vendor_syncs(loader, step, device):
    """Right: `from time import perf_counter_ns`, each vendor's own wait, given the device."""
    loads, steps = [], []
    asked = perf_counter_ns()
    for batch in loader:
        arrived = perf_counter_ns()
        step(batch)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elif device.type == "mps":
            torch.mps.synchronize()
        finished = perf_counter_ns()
        loads.append((arrived - asked) / 1e9)
        steps.append((finished - arrived) / 1e9)
        asked = finished
    loader_s, model_s = statistics.fmean(loads), statistics.fmean(steps)
    return ("loader" if loader_s > model_s else "model"), loader_s, model_s


def find_bottleneck_subtracting(loader, step, device):
    """Right: time.monotonic, the loader's share as the whole loop minus the steps."""
    model_total, count = 0.0, 0
    begin = time.monotonic()
    for count, batch in enumerate(loader, start=1):  # noqa: B007 - count is used after
        started = time.monotonic()
        step(batch)
        synchronize(device)
        model_total += time.monotonic() - started
    loader_total = time.monotonic() - begin - model_total
    return ("loader" if loader_total > model_total else "model", loader_total / count,
            model_total / count)


ALTERNATIVES = [find_bottleneck_with_next_and_accelerator, answer(summarise=statistics.median),
                answer(clock=timeit.default_timer), answer(summarise=lambda values:
                statistics.fmean(values[1:])), find_bottleneck_with_ns_and_vendor_syncs,
                find_bottleneck_subtracting]
