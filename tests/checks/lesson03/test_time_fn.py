"""Tests of the check course_utils/checks/lesson03/time_fn.py."""
from __future__ import annotations

import statistics
import time
import timeit
from time import perf_counter

import pytest
import torch

from course_utils import checks, synchronize

from ...probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from ...solutions import solution
from .shared import time_fn_not_done, time_fn_timing_all_calls_together

time_fn = solution("03_timing", "time_fn")


# ------------------------------------------------------------------ time_fn: right answers

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


@pytest.mark.parametrize("answer", [time_fn, time_fn_with_accelerator_api,
                                    time_fn_with_vendor_apis, time_fn_syncing_everywhere,
                                    time_fn_with_imported_clock, time_fn_with_timeit_repeat,
                                    time_fn_with_a_timer, time_fn_with_events],
                         ids=lambda f: f.__name__)
def test_time_fn_right_answers_keep_full_marks(answer, capsys):
    passes(checks.check_time_fn, answer)
    printed = capsys.readouterr().out
    assert ("synchronises the device between fn() and every clock reading and returns the "
            "median") in printed
    assert ("cuda on a Linux machine with one NVIDIA H100; cpu on a laptop with no GPU; cpu on a "
            "Linux machine with one NVIDIA H100.") in printed


def test_time_fn_visible_success_line_names_only_the_visible_machines(capsys):
    checks.check_time_fn(time_fn)
    line = capsys.readouterr().out
    assert "H100" in line and "no GPU" in line and "mps" not in line and "cuda:1" not in line


def test_time_fn_check_leaves_the_clocks_and_torch_unpatched():
    clocks = (time.perf_counter, time.time, time.monotonic, time.perf_counter_ns,
              timeit.default_timer)
    syncs = (torch.cuda.synchronize, torch.mps.synchronize, torch.accelerator.synchronize,
             torch.cuda.Event, torch.Event)
    checks.check_time_fn(time_fn_with_imported_clock, hidden=True, seed=3)
    assert perf_counter is time.perf_counter is clocks[0]
    assert (time.perf_counter, time.time, time.monotonic, time.perf_counter_ns,
            timeit.default_timer) == clocks
    assert (torch.cuda.synchronize, torch.mps.synchronize, torch.accelerator.synchronize,
            torch.cuda.Event, torch.Event) == syncs


# ------------------------------------------------------------------ time_fn: mistakes

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


def test_a_timer_that_never_synchronises():
    answer = timer(sync_after_warmup=False, after=False)
    message = failure(checks.check_time_fn, answer)
    assert message.startswith("✘ cuda on a Linux machine with one NVIDIA H100: time_fn() never "
                              "synchronises cuda")
    assert "how fast Python queues work" in message
    assert "✔ passed: cpu on a laptop with no GPU" in message
    assert graded(checks.check_time_fn, (answer,), hidden=False, seed=0).fraction == \
        pytest.approx(2 / 3)
    assert graded(checks.check_time_fn, (answer,), hidden=True, seed=1).fraction == \
        pytest.approx(2 / 5)


def test_a_timer_that_synchronises_before_but_not_after():
    message = failure(checks.check_time_fn, timer(before=True, after=False))
    assert "time_fn() synchronises, but reads the clock right after fn() with no " \
           "synchronisation in between" in message
    assert "after each fn(), before reading the clock, call course_utils.synchronize(device)" \
           in message


def test_a_timer_that_skips_the_warm_up():
    message = failure(checks.check_time_fn, timer(warm=False))
    assert "started the clock after 0 call(s) of fn(), with warmup=2: it skips the warm-up" \
           in message
    assert "call fn() `warmup` times before the timing loop" in message
    assert "passed" not in message  # the CPU case fails too: warm-up matters everywhere


def test_a_timer_that_does_not_wait_for_the_warm_up():
    message = failure(checks.check_time_fn, timer(sync_after_warmup=False))
    assert ("started the clock with no synchronisation after the warm-up, while the warm-up "
            "was still running") in message
    assert "synchronise once after the warm-up loop" in message


def test_a_timer_that_synchronises_the_current_gpu_instead_of_the_given_one():
    def current_gpu_only(device):
        if device.type == "cuda":
            torch.cuda.synchronize()  # the current device, cuda:0, whatever `device` says
        elif device.type == "mps":
            torch.mps.synchronize()
    answer = timer(wait=current_gpu_only)
    checks.check_time_fn(answer)  # right where the device is cuda:0
    message = failure(checks.check_time_fn, answer, hidden=True, seed=0)
    assert "time_fn() synchronises cuda:0, but fn()'s work runs on cuda:1" in message


@pytest.mark.parametrize("wait, api", [
    (lambda device: torch.cuda.synchronize(device), "torch.cuda.synchronize"),
    (lambda device: torch.accelerator.synchronize(), "torch.accelerator.synchronize"),
])
def test_a_timer_whose_synchronisation_crashes_without_a_gpu(wait, api):
    message = failure(checks.check_time_fn, timer(wait=wait))
    assert message.startswith("✘ cpu on a laptop with no GPU: ")
    assert f"time_fn() called {api}(), which raises RuntimeError on this machine" in message
    assert "does nothing on the CPU" in message
    # the fix offers no call that raises here (the learner who followed such a hint is here)
    assert "torch.accelerator.synchronize(device)" not in message.split("How to fix it")[-1]


@pytest.mark.parametrize("wait, api", [
    (lambda device: torch.accelerator.is_available() and torch.accelerator.synchronize(device),
     "torch.accelerator.synchronize"),
    (lambda device: torch.cuda.is_available() and torch.cuda.synchronize(device),
     "torch.cuda.synchronize"),
], ids=["accelerator if available", "cuda if available"])
def test_a_sync_guarded_by_the_machine_raises_for_cpu_work_on_a_gpu_machine(wait, api):
    """Guarded by what the machine has, not by `device`: CPU work on a GPU machine raises."""
    message = failure(checks.check_time_fn, timer(wait=wait))
    assert message.startswith(f"✘ cpu on a Linux machine with one NVIDIA H100: time_fn() called "
                              f"{api}(), which raises ValueError on this machine.")
    assert "How to fix it: synchronise with course_utils.synchronize(device), which waits for " \
        "the work queued on the device and does nothing on the CPU" in message
    assert "✔ passed: cuda on a Linux machine with one NVIDIA H100; cpu on a laptop" in message


def test_the_fix_for_a_raising_accelerator_sync_does_not_recommend_it():
    message = failure(checks.check_time_fn, timer(wait=lambda d: torch.accelerator.synchronize()))
    fix = message.split("How to fix it: ")[1]
    assert fix.startswith("synchronise with course_utils.synchronize(device)")
    assert "torch.accelerator's synchronize raises for a CPU device" in fix
    assert "torch.accelerator.synchronize(device)" not in fix  # named, never offered


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


def time_fn_ending_on_cpu_time(fn, device, warmup, repeats):
    """Wrong: the end of each call read from time.process_time, another clock."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.process_time() - start)
    return statistics.median(times)


def time_fn_with_events_read_too_early(fn, device, warmup, repeats):
    """Wrong: elapsed_time() before the device has reached the end event."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def test_an_events_time_read_before_the_device_reached_it():
    message = failure(checks.check_time_fn, time_fn_with_events_read_too_early)
    assert message.startswith("✘ cuda on a Linux machine with one NVIDIA H100: time_fn() asked "
                              "an event's elapsed_time() before the device had reached the end "
                              "event, which raises on a GPU.")
    assert "wait with end.synchronize()" in message


def test_events_of_the_current_gpu_time_nothing_on_the_second():
    def current_device_events(fn, device, warmup, repeats):
        for _ in range(warmup):
            fn()
        synchronize(device)
        times = []
        for _ in range(repeats):
            start, end = torch.Event(enable_timing=True), torch.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            synchronize(device)
            times.append(start.elapsed_time(end) / 1e3 if device.type != "cpu" else 0.0)
        return statistics.median(times)
    message = failure(checks.check_time_fn, current_device_events, hidden=True, seed=1)
    assert "✘ cuda:1 on a server with two NVIDIA A100s: time_fn() recorded its events on " \
        "cuda:0, but fn()'s work runs on cuda:1: they time nothing of it." in message


def test_a_clock_reading_before_the_warm_up_is_not_taken_for_timing_it():
    passes(checks.check_time_fn, time_fn_with_an_overall_clock)


def test_another_clock_is_not_taken_for_timing_the_calls_together():
    message = failure(checks.check_time_fn, time_fn_ending_on_cpu_time)
    assert "time_fn() read the clock 5 times for 5 timed calls: the other readings came from a " \
           "clock the check does not follow" in message
    assert "times the calls together" not in message


def test_a_statistic_is_named_only_where_the_value_tells_it_apart():
    from course_utils.checks.framework import CheckFailure
    from course_utils.checks.lesson03.time_fn_rules import _expect_median

    run = {"warmup": 0, "repeats": 3, "launch_s": 0.0, "work_s": [0.001, 0.002, 0.05]}
    with pytest.raises(CheckFailure) as raised:
        _expect_median(run, 0.001, hidden=True)
    assert str(raised.value).startswith("time_fn() returned the fastest and the first of the "
                                        "timed calls.")
    for inputs in (checks.check_time_fn.make_inputs(seed, True) for seed in HIDDEN_SEEDS):
        for case in inputs["cases"]:
            timed = case["work_s"][case["warmup"]:]
            assert 0 < timed.index(min(timed)) < len(timed) - 1


def test_torch_cuda_synchronize_on_a_mac_fails_the_hidden_part():
    def cuda_wait(device):
        if device.type != "cpu":
            torch.cuda.synchronize(device)
    message = failure(checks.check_time_fn, timer(wait=cuda_wait), hidden=True, seed=0)
    assert "a Mac with Apple silicon (MPS): time_fn() called torch.cuda.synchronize()" in message


@pytest.mark.parametrize("summary, hint", [
    (statistics.fmean, "returned the mean of the timed calls"),
    (min, "returned the fastest of the timed calls"),
    (max, "returned the slowest of the timed calls"),
    (lambda times: times[0], "returned the first of the timed calls"),
    (lambda times: times[-1], "returned the last of the timed calls"),
    (sum, "returned the sum of the timed calls"),
    (lambda times: 1e3 * statistics.median(times), "returned the median in milliseconds"),
])
def test_a_timer_returning_another_statistic(summary, hint):
    message = failure(checks.check_time_fn, timer(summary=summary))
    assert hint in message


def test_a_wrong_time_in_a_hidden_case_does_not_reveal_the_expected_value():
    answer = timer(summary=lambda times: times[0] + times[-1])
    visible = failure(checks.check_time_fn, answer)
    assert "expected about" in visible
    for seed in HIDDEN_SEEDS:
        message = failure(checks.check_time_fn, answer, hidden=True, seed=seed)
        assert "the time time_fn() returned is" in message and "expected" not in message


@pytest.mark.parametrize("summary, hint", [
    (list, "time_fn() returned list, not a number of seconds"),
    (lambda times: torch.tensor(times).median(), "(.item() turns a one-element tensor"),
])
def test_a_timer_returning_something_else_than_a_number(summary, hint):
    assert hint in failure(checks.check_time_fn, timer(summary=summary))


def time_fn_ignoring_repeats(fn, device, warmup, repeats):
    return time_fn(fn, device, warmup, 10)


def time_fn_without_timed_calls(fn, device, warmup, repeats):
    return time_fn(fn, device, warmup, 0)  # statistics.median([]) raises


def time_fn_on_cpu_time(fn, device, warmup, repeats):
    return timer(clock="process_time")(fn, device, warmup, repeats)


def time_fn_waiting_for_a_clock_that_never_moves(fn, device, warmup, repeats):
    start = time.perf_counter()
    while time.perf_counter() - start < 1.0:
        pass
    return 0.0


@pytest.mark.parametrize("answer, hint", [
    (time_fn_timing_all_calls_together,
     "it times the calls together, but a median needs one time per call"),
    (time_fn_ignoring_repeats, ("called fn() 12 times, 2 before the clock started and 10 after; "
                               "with warmup=2 and repeats=5 that is 7 calls, 2 untimed and 5")),
    (time_fn_on_cpu_time, "never read a clock that the check follows"),
    (time_fn_without_timed_calls, ("after 2 call(s) of fn() where warmup=2 and repeats=5 make 7, "
                                   "time_fn() raised StatisticsError")),
    (time_fn_waiting_for_a_clock_that_never_moves,
     "did not finish: it called fn() or read the clock thousands of times"),
    (time_fn_not_done, "time_fn() is not implemented yet"),
], ids=lambda value: getattr(value, "__name__", "hint"))
def test_time_fn_other_mistakes(answer, hint):
    assert hint in failure(checks.check_time_fn, answer)


def test_time_fn_hidden_inputs_follow_the_seed_and_have_a_slow_call():
    made = [checks.check_time_fn.make_inputs(seed, True) for seed in HIDDEN_SEEDS]
    assert len({str(inputs) for inputs in made}) > 1
    for inputs in made:
        devices = sorted(run["device"] for run in inputs["cases"])
        assert devices == ["cpu", "cpu", "cuda", "cuda:1", "mps"]
        for run in inputs["cases"]:
            timed = run["work_s"][run["warmup"]:]
            assert statistics.fmean(timed) > 1.1 * statistics.median(timed)
