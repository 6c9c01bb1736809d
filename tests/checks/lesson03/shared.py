"""What the tests of lesson 03's exercises share."""
from __future__ import annotations

import time

from course_utils import synchronize


def time_fn_timing_all_calls_together(fn, device, warmup, repeats):
    for _ in range(warmup):
        fn()
    synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    synchronize(device)
    return (time.perf_counter() - start) / repeats


def time_fn_not_done(fn, device, warmup, repeats):
    raise NotImplementedError()
