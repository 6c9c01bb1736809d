"""Right alternatives: copied from tests/test_checks_lesson03.py, and own."""
from __future__ import annotations

import statistics
import time
import timeit
from time import perf_counter

import torch

from course_utils import synchronize


def time_fn_with_accelerator_api(fn, device, warmup, repeats):
    """Right: torch.accelerator, skipped on the CPU."""
    def wait():
        if device.type != "cpu":
            torch.accelerator.synchronize(device)
    for _ in range(warmup):
        fn()
    wait()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        wait()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_fn_with_vendor_apis(fn, device, warmup, repeats):
    """Right: each vendor's own call, a lap timer on perf_counter_ns, the upper median."""
    def wait():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elif device.type == "mps":
            torch.mps.synchronize()
    for _ in range(warmup):
        fn()
    wait()
    laps, last = [], time.perf_counter_ns()
    for _ in range(repeats):
        fn()
        wait()
        now = time.perf_counter_ns()
        laps.append((now - last) / 1e9)
        last = now
    return sorted(laps)[len(laps) // 2]


def time_fn_syncing_everywhere(fn, device, warmup, repeats):
    """Right: extra synchronisations, timeit's clock and the lower median."""
    for _ in range(warmup):
        fn()
        synchronize(device)
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = timeit.default_timer()
        fn()
        synchronize(device)
        times.append(timeit.default_timer() - start)
    return statistics.median_low(times)


def time_fn_with_imported_clock(fn, device, warmup, repeats):
    """Right: `from time import perf_counter`, a name bound to the real clock."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        start = perf_counter()
        fn()
        synchronize(device)
        times.append(perf_counter() - start)
    return statistics.median(times)


def time_fn_with_timeit_repeat(fn, device, warmup, repeats):
    """Right: timeit.repeat, one call per repetition (timeit bound its clock at import)."""
    for _ in range(warmup):
        fn()
    synchronize(device)

    def once():
        fn()
        synchronize(device)
    return statistics.median(timeit.repeat(once, repeat=repeats, number=1))


def time_fn_with_a_timer(fn, device, warmup, repeats):
    """Right: a timeit.Timer on time.perf_counter, and integer nanoseconds elsewhere."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    timer = timeit.Timer(lambda: (fn(), synchronize(device)), timer=time.perf_counter)
    return statistics.median(timer.repeat(repeat=repeats, number=1))


def time_fn_with_events(fn, device, warmup, repeats):
    """Right: device events on an accelerator (torch.Event), the clock on the CPU."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        if device.type == "cpu":
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
            continue
        start = torch.Event(device=device, enable_timing=True)
        end = torch.Event(device=device, enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)  # milliseconds
    return statistics.median(times)


def timer(*, warm=True, sync_after_warmup=True, before=False, after=True, summary=None,
          wait=synchronize, clock="perf_counter"):
    """A time_fn built from switches, one switch per typical mistake."""
    def answer(fn, device, warmup, repeats):
        read = getattr(time, clock)
        for _ in range(warmup if warm else 0):
            fn()
        if sync_after_warmup:
            wait(device)
        times = []
        for _ in range(repeats):
            if before:
                wait(device)
            start = read()
            fn()
            if after:
                wait(device)
            times.append(read() - start)
        return (summary or statistics.median)(times)
    return answer


def time_fn_with_an_overall_clock(fn, device, warmup, repeats):
    """Right: a reading of the clock before the warm-up, for a total it does not return."""
    began = time.perf_counter()
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    total = time.perf_counter() - began
    return statistics.median(times) if total >= 0 else None


ALTERNATIVES = [time_fn_with_accelerator_api, time_fn_with_vendor_apis, time_fn_syncing_everywhere,
                time_fn_with_imported_clock, time_fn_with_timeit_repeat, time_fn_with_a_timer,
                time_fn_with_events, time_fn_with_an_overall_clock]
