"""time_fn's verdict on one simulated machine: the rules, kept apart from the inputs and probe."""
from __future__ import annotations

import statistics
from itertools import pairwise

from ..framework import expect_close, expect_no_error, fail, is_stub

SYNC = ("course_utils.synchronize(device), which waits for the work queued on any accelerator "
        "and does nothing on the CPU (torch.accelerator.synchronize(device) waits too, but "
        "raises for a CPU device, and on a machine without an accelerator: call it only "
        "when device.type != 'cpu')")
# After a synchronisation that raised: the one call that cannot raise, and no alternative that
# may be the very call that just failed.
SAFE_SYNC = ("course_utils.synchronize(device), which waits for the work queued on the device "
             "and does nothing on the CPU (torch.accelerator's synchronize raises for a CPU "
             "device, and on a machine without an accelerator)")


def verify(run: dict, result: dict, hidden: bool) -> None:
    where = f"With device {run['device']} (simulated)"  # the case's name names the machine
    warmup, repeats, log, error = run["warmup"], run["repeats"], result["log"], result["error"]
    steps = "call fn() `warmup` times untimed, then time `repeats` calls one by one."
    if result["stopped"]:
        fail("time_fn() did not finish: it called fn() or read the clock thousands of "
             "times.", steps)
    syncs = [event for event in log if event["event"] == "sync"]
    if error and syncs and syncs[-1]["device"] is None:  # the synchronisation itself raised
        fail(f"time_fn() called {syncs[-1]['api']}(), which raises {error['type']} on "
             "this machine.", f"synchronise with {SAFE_SYNC}.")
    if error and log and log[-1]["event"] == "unfinished":  # as CUDA refuses it
        fail("time_fn() asked an event's elapsed_time() before the device had reached the end "
             "event, which raises on a GPU.", "after end.record(), wait with end.synchronize() "
             "(or course_utils.synchronize(device)), then call start.elapsed_time(end).")
    works = [i for i, event in enumerate(log) if event["event"] == "work"]
    if error and not is_stub(error) and len(works) != warmup + repeats:  # what ran before it
        where += (f", after {len(works)} call(s) of fn() where warmup={warmup} and "
                  f"repeats={repeats} make {warmup + repeats}")
    expect_no_error(error, "time_fn()", where=where)
    if result["seconds"] is None:
        kind = result["returned"]["type"]
        fail(f"time_fn() returned {kind}, not a number of seconds.",
             "return the median as a float: statistics.median(times)" +
             (" (.item() turns a one-element tensor into a float)." if kind == "Tensor" else "."))
    reads = [i for i, event in enumerate(log) if event["event"] == "clock"]
    if not reads:
        fail("time_fn() never read a clock that the check follows (time.perf_counter, "
             "time.time, time.monotonic, their _ns forms or timeit.default_timer).",
             "time each call with time.perf_counter(), before and after it.")
    right_value = _is_a_median(run, result["seconds"])
    if sum(index < reads[0] for index in works) < warmup and not right_value:
        fail("time_fn() started the clock after "
             f"{sum(index < reads[0] for index in works)} call(s) of fn(), with warmup={warmup}: "
             "it skips the warm-up. The first calls pay for start-up (on a GPU the CUDA context "
             "and loading kernels; anywhere, allocating memory), so they would be timed too.",
             "call fn() `warmup` times before the timing loop, and do not time those calls.")
    if len(works) != warmup + repeats:
        untimed = sum(index < reads[0] for index in works)
        fail(f"time_fn() called fn() {len(works)} times, {untimed} before the clock started and "
             f"{len(works) - untimed} after; with warmup={warmup} and repeats={repeats} that is "
             f"{warmup + repeats} calls, {warmup} untimed and {repeats} timed.", steps)
    if len(reads) < repeats + 1:
        together = any(sum(a < work < b for work in works) > 1 for a, b in pairwise(reads))
        fail(f"time_fn() read the clock {len(reads)} times for {repeats} timed calls: " + (
             "it times the calls together, but a median needs one time per call." if together
             else "the other readings came from a clock the check does not follow (say "
             "time.process_time, which counts this process's CPU time, not the wait)."),
             "read time.perf_counter() before and after each timed call, and keep each "
             "duration.")
    elsewhere = {log[i]["device"] for i in reads if log[i].get("device", run["queue"])
                 != run["queue"]}
    if elsewhere:
        fail(f"time_fn() recorded its events on {', '.join(sorted(elsewhere))}, but fn()'s "
             f"work runs on {run['device']}: they time nothing of it.",
             "make the events for the device you were given, torch.Event(device=device, "
             "enable_timing=True), or time with time.perf_counter() and synchronize(device).")
    _expect_synchronised(run, log, reads, syncs)
    _expect_median(run, result["seconds"], hidden)


def _timed(run: dict) -> list[float]:
    start = run["warmup"]
    return [run["launch_s"] + work for work in run["work_s"][start:start + run["repeats"]]]


def _same(value: float, other: float) -> bool:
    return abs(value - other) <= 1e-9 + 1e-6 * abs(other)


def _is_a_median(run: dict, value: float | None) -> bool:
    times = _timed(run)  # an even count has two middle values: either, or their mean
    return value is not None and any(_same(value, median) for median in (
        statistics.median(times), statistics.median_low(times), statistics.median_high(times)))


def _expect_median(run: dict, value: float, hidden: bool) -> None:
    if _is_a_median(run, value):
        return
    times = _timed(run)
    fixes = {"the mean": ("one slow call (another process, a page fault) pulls the mean up; "
                          "the median ignores it: statistics.median(times)."),
             "the sum": "return the median of the per-call times, not their sum.",
             "the median in milliseconds": "return seconds."}
    statistic = {"the mean": statistics.fmean(times), "the fastest": min(times),
                 "the slowest": max(times), "the sum": sum(times), "the first": times[0],
                 "the last": times[-1], "the median in milliseconds": 1e3 * statistics.median(
                     times)}
    matches = [name for name, other in statistic.items() if _same(value, other)]
    if matches:  # named only where the value tells them apart: the fastest may be the first
        fail(f"time_fn() returned {' and '.join(matches)} of the timed calls.",
             fixes.get(matches[0], "return the median, statistics.median(times).")
             if len(matches) == 1 else "return the median, statistics.median(times).")
    expect_close(value, statistics.median(times), "the time time_fn() returned",
                 "return statistics.median(times), with one duration in seconds per timed call.",
                 rel=1e-6, abs_tol=1e-9, reveal=not hidden)


def _expect_synchronised(run: dict, log: list, reads: list[int], syncs: list[dict]) -> None:
    """No clock reading while fn()'s work is still queued on the device, or the slip named."""
    late = [index for index in reads if run["queue"] in log[index]["pending"]]
    if late:
        synced = {event["device"] for event in syncs}
        if not syncs:
            cause = (f"never synchronises {run['device']}: fn() returns as soon as its work is "
                     "queued on the device, so the clock stops before the work has run.")
        elif run["queue"] not in synced:
            cause = (f"synchronises {', '.join(sorted(map(str, synced)))}, but fn()'s work runs "
                     f"on {run['device']}: pass the device you were given.")
        elif late[0] == reads[0]:
            fail("time_fn() started the clock with no synchronisation after the warm-up, while "
                 "the warm-up was still running on the device, so the first timed call also "
                 "counts the rest of the warm-up.",
                 "synchronise once after the warm-up loop, before the first clock reading.")
        else:
            cause = ("synchronises, but reads the clock right after fn() with no "
                     "synchronisation in between: fn() only queues the work on the device.")
        fail(f"time_fn() {cause} The times measure how fast Python queues work, not "
             "how long the device runs it.", f"after each fn(), before reading the clock, "
             f"call {SYNC}.")
