"""Lesson 03 checks: right answers pass, each typical mistake gets its own hint."""
from __future__ import annotations

import statistics
import time
import timeit
from time import perf_counter

import numpy as np
import pytest
import torch

from course_utils import checks, synchronize
from course_utils.checks.lesson03.crossover import expected_crossover

from .probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from .solutions import solution

time_fn = solution("03_timing", "time_fn")
crossover = solution("03_timing", "crossover")


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
    assert "started the clock while the warm-up was still running" in message
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


def time_fn_timing_all_calls_together(fn, device, warmup, repeats):
    for _ in range(warmup):
        fn()
    synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    synchronize(device)
    return (time.perf_counter() - start) / repeats


def time_fn_ignoring_repeats(fn, device, warmup, repeats):
    return time_fn(fn, device, warmup, 10)


def time_fn_on_cpu_time(fn, device, warmup, repeats):
    return timer(clock="process_time")(fn, device, warmup, repeats)


def time_fn_waiting_for_a_clock_that_never_moves(fn, device, warmup, repeats):
    start = time.perf_counter()
    while time.perf_counter() - start < 1.0:
        pass
    return 0.0


def time_fn_not_done(fn, device, warmup, repeats):
    raise NotImplementedError()


@pytest.mark.parametrize("answer, hint", [
    (time_fn_timing_all_calls_together,
     "it times the calls together, but a median needs one time per call"),
    (time_fn_ignoring_repeats, "called fn() 12 times; with warmup=2 and repeats=5 that is 7"),
    (time_fn_on_cpu_time, "never read a clock that the check follows"),
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


# ------------------------------------------------------------------ crossover

def crossover_from_the_end(sizes, cpu_times, acc_times):
    """Right: walk back from the largest size while the accelerator wins."""
    found = None
    for index in reversed(range(len(sizes))):
        if not acc_times[index] < cpu_times[index]:
            break
        found = sizes[index]
    return found


def crossover_with_all(sizes, cpu_times, acc_times):
    """Right: the first index from which every later pair is a win."""
    pairs = list(zip(cpu_times, acc_times, strict=True))
    for index, size in enumerate(sizes):
        if all(acc < cpu for cpu, acc in pairs[index:]):
            return size
    return None


def crossover_with_numpy(sizes, cpu_times, acc_times):
    """Right: NumPy does the comparison and the size comes back as a NumPy integer."""
    wins = np.asarray(acc_times) < np.asarray(cpu_times)
    losses = np.flatnonzero(~wins)
    first = losses[-1] + 1 if losses.size else 0
    return np.asarray(sizes)[first] if first < len(sizes) else None


def crossover_with_a_flag_list(sizes, cpu_times, acc_times):
    """Right: a list of wins, then the last loss found with a reversed index."""
    wins = [acc < cpu for cpu, acc in zip(cpu_times, acc_times, strict=True)]
    if not wins[-1]:
        return None
    last_loss = max((i for i, win in enumerate(wins) if not win), default=-1)
    return sizes[last_loss + 1]


def crossover_with_a_while_loop(sizes, cpu_times, acc_times):
    """Right: a while loop from the end, on tuples of numbers (any sequence works)."""
    sizes, cpu_times, acc_times = tuple(sizes), tuple(cpu_times), tuple(acc_times)
    index = len(sizes)
    while index > 0 and acc_times[index - 1] < cpu_times[index - 1]:
        index -= 1
    return sizes[index] if index < len(sizes) else None


@pytest.mark.parametrize("answer", [crossover, crossover_from_the_end, crossover_with_all,
                                    crossover_with_numpy, crossover_with_a_flag_list,
                                    crossover_with_a_while_loop], ids=lambda f: f.__name__)
def test_crossover_right_answers_keep_full_marks(answer, capsys):
    passes(checks.check_crossover, answer)
    printed = capsys.readouterr().out
    assert "a clean crossing → 128; an accelerator that is never faster → None; one noisy " \
           "point → 128; a tie just before the crossing → 256." in printed
    assert "a sweep that crosses back;" in printed or "a sweep that crosses back." in printed


def test_crossover_hidden_success_line_reveals_no_answer(capsys):
    checks.check_crossover(crossover, hidden=True, seed=1)
    assert "→" not in capsys.readouterr().out


def crossover_first_win(sizes, cpu_times, acc_times):
    return next((s for s, c, a in zip(sizes, cpu_times, acc_times, strict=True) if a < c),
                None)


def crossover_with_ties(sizes, cpu_times, acc_times):
    return crossover(sizes, [c * (1 + 1e-12) for c in cpu_times], acc_times)


def crossover_index(sizes, cpu_times, acc_times):
    found = crossover(sizes, cpu_times, acc_times)
    return None if found is None else sizes.index(found)


def crossover_raising_when_never(sizes, cpu_times, acc_times):
    wins = [index for index in range(len(sizes))
            if all(a < c for c, a in zip(cpu_times[index:], acc_times[index:], strict=True))]
    return sizes[min(wins)]


def crossover_the_wrong_way_round(sizes, cpu_times, acc_times):
    return crossover(sizes, acc_times, cpu_times)


def crossover_one_too_late(sizes, cpu_times, acc_times):
    found = crossover(sizes, cpu_times, acc_times)
    return None if found in (None, sizes[-1]) else sizes[sizes.index(found) + 1]


def crossover_never_none(sizes, cpu_times, acc_times):
    found = crossover(sizes, cpu_times, acc_times)
    return sizes[-1] if found is None else found


def crossover_always_none(sizes, cpu_times, acc_times):
    return None


def crossover_as_text(sizes, cpu_times, acc_times):
    return str(crossover(sizes, cpu_times, acc_times))


@pytest.mark.parametrize("answer, hint, share", [
    (crossover_first_win, ("crossover() returned 32, but the accelerator is slower again at "
                           "64: a faster point followed by slower ones is noise"), 3 / 4),
    (crossover_index, ("which is not one of the sizes: it looks like the position in the list; "
                       "return sizes[3]"), 1 / 4),
    (crossover_raising_when_never, ("when the accelerator never stays faster up to the largest "
                                    "size, return None"), 3 / 4),
    (crossover_the_wrong_way_round, "where the accelerator is slower than the CPU", 0),
    (crossover_one_too_late, "but the accelerator is already faster at 128, the size before it",
     1 / 4),
    (crossover_never_none, "crossover() returned 1024, where the accelerator is slower", 3 / 4),
    (crossover_always_none, ("crossover() returned None, but the accelerator stays faster from "
                             "some size on"), 1 / 4),
    (crossover_as_text, "crossover() returned str", 0),
], ids=lambda value: getattr(value, "__name__", ""))
def test_crossover_mistakes(answer, hint, share):
    message = failure(checks.check_crossover, answer)
    assert hint in message
    assert graded(checks.check_crossover, (answer,), hidden=False, seed=0).fraction == \
        pytest.approx(share)


def test_crossover_ties_fail_the_visible_check_too():
    """The visible check has a tie, so `<=` does not get a tick there and lose points later."""
    visible = failure(checks.check_crossover, crossover_with_ties)
    assert "✘ a tie just before the crossing: crossover() returned 128, where both took the " \
        "same time" in visible
    message = failure(checks.check_crossover, crossover_with_ties, hidden=True, seed=1)
    assert "where both took the same time: equal is not faster" in message
    assert graded(checks.check_crossover, (crossover_with_ties,), hidden=True,
                  seed=1).fraction == pytest.approx(5 / 6)


def test_crossover_crossing_back_is_noise_in_the_hidden_part():
    message = failure(checks.check_crossover, crossover_first_win, hidden=True, seed=1)
    assert "✘ a sweep that crosses back: crossover() returned" in message
    assert "but the accelerator is slower again at" in message


def test_crossover_hidden_messages_do_not_reveal_the_answer():
    for seed in HIDDEN_SEEDS:
        inputs = checks.check_crossover.make_inputs(seed, True)
        message = failure(checks.check_crossover, crossover_always_none, hidden=True, seed=seed)
        for sweep in inputs["cases"]:
            answer = expected_crossover(sweep["sizes"], sweep["cpu"], sweep["acc"])
            if answer is not None:
                assert f" {answer}" not in message


@pytest.mark.parametrize("acc, expected", [
    ([2, 2, 2, 2], None),        # never faster
    ([0, 0, 0, 0], 1),           # faster from the start
    ([2, 0, 2, 0], 8),           # noisy: the run of wins that reaches the end starts at 8
    ([2, 0, 0, 2], None),        # crosses back
    ([2, 1, 0, 0], 4),           # a tie (1 == 1) is not faster
])
def test_expected_crossover_rule(acc, expected):
    assert expected_crossover([1, 2, 4, 8], [1, 1, 1, 1], acc) == expected


def test_crossover_hidden_sweeps_have_every_pattern_and_follow_the_seed():
    made = [checks.check_crossover.make_inputs(seed, True) for seed in HIDDEN_SEEDS]
    assert len({str(inputs) for inputs in made}) > 1
    for inputs in made:
        answers = {sweep["what"]: expected_crossover(sweep["sizes"], sweep["cpu"], sweep["acc"])
                   for sweep in inputs["cases"]}
        assert answers["an accelerator that is never faster"] is None
        assert answers["a sweep that crosses back"] is None
        assert answers["an accelerator faster from the start"] is not None
        noisy = next(s for s in inputs["cases"] if s["what"] == "one noisy point")
        assert crossover_first_win(noisy["sizes"], noisy["cpu"], noisy["acc"]) != \
            answers["one noisy point"]


@pytest.mark.parametrize("answer, check", [
    (time_fn_timing_all_calls_together, checks.check_time_fn),
    (crossover_first_win, checks.check_crossover),
])
def test_wrong_answers_lose_points_when_graded(answer, check):
    assert graded(check, (answer,), hidden=True, seed=1).fraction < 1


def crossover_not_done(sizes, cpu_times, acc_times):
    raise NotImplementedError()


@pytest.mark.parametrize("check, stub, name", [
    (checks.check_time_fn, time_fn_not_done, "time_fn()"),
    (checks.check_crossover, crossover_not_done, "crossover()"),
])
def test_an_unsolved_exercise_gets_one_not_implemented_message(check, stub, name):
    for hidden in (False, True):
        message = failure(check, stub, hidden=hidden, seed=1)
        assert message == (f"{name} is not implemented yet (it raises NotImplementedError).\n"
                           "How to fix it: replace `raise NotImplementedError()` with your code "
                           "and run the cell again.")
