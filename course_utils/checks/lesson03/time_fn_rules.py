"""time_fn's verdict on one simulated machine: the rules, kept apart from the inputs and probe."""
from __future__ import annotations

import statistics

from ..framework import expect_close, expect_no_error, fail

SYNC = ("course_utils.synchronize(device), which waits for the work queued on any accelerator "
        "and does nothing on the CPU (torch.accelerator.synchronize(device) waits too, but "
        "raises RuntimeError on a machine without an accelerator: call it only when "
        "device.type != 'cpu')")
# After a synchronisation that raised: the one call that cannot raise, and no alternative that
# may be the very call that just failed.
SAFE_SYNC = ("course_utils.synchronize(device), which waits for the work queued on any "
             "accelerator and does nothing on the CPU")


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
    expect_no_error(error, "time_fn()", where=where)
    if result["seconds"] is None:
        kind = result["returned"]["type"]
        fail(f"time_fn() returned {kind}, not a number of seconds.",
             "return the median as a float: statistics.median(times)" +
             (" (.item() turns a one-element tensor into a float)." if kind == "Tensor" else "."))
    works = [i for i, event in enumerate(log) if event["event"] == "work"]
    reads = [i for i, event in enumerate(log) if event["event"] == "clock"]
    if not reads:
        fail("time_fn() never read a clock that the check follows (time.perf_counter, "
             "time.time, time.monotonic, their _ns forms or timeit.default_timer).",
             "time each call with time.perf_counter(), before and after it.")
    if sum(index < reads[0] for index in works) < warmup:
        fail("time_fn() started the clock after "
             f"{sum(index < reads[0] for index in works)} call(s) of fn(), with warmup={warmup}: "
             "it skips the warm-up. The first calls pay for start-up (on a GPU the CUDA context "
             "and loading kernels; anywhere, allocating memory), so they would be timed too.",
             "call fn() `warmup` times before the timing loop, and do not time those calls.")
    if len(works) != warmup + repeats:
        fail(f"time_fn() called fn() {len(works)} times; with warmup={warmup} and "
             f"repeats={repeats} that is {warmup + repeats} calls.", steps)
    if len(reads) < repeats + 1:
        fail(f"time_fn() read the clock {len(reads)} times for {repeats} timed calls: "
             "it times the calls together, but a median needs one time per call.",
             "read the clock before and after each timed call, and keep each duration.")
    _expect_synchronised(run, log, reads, syncs)
    _expect_median(run, result["seconds"], hidden)


def _expect_median(run: dict, value: float, hidden: bool) -> None:
    start = run["warmup"]
    times = [run["launch_s"] + work for work in run["work_s"][start:start + run["repeats"]]]
    medians = (statistics.median(times), statistics.median_low(times),
               statistics.median_high(times))  # an even count has two middle values
    if any(abs(value - median) <= 1e-9 + 1e-6 * median for median in medians):
        return
    for what, other, fix in [
            ("the mean", statistics.fmean(times), ("one slow call (another process, a page "
                                                   "fault) pulls the mean up; the median "
                                                   "ignores it: statistics.median(times).")),
            ("the fastest", min(times), "return the median, statistics.median(times)."),
            ("the sum", sum(times), "return the median of the per-call times, not their sum."),
            ("the median in milliseconds", 1e3 * medians[0], "return seconds.")]:
        if abs(value - other) <= 1e-9 + 1e-6 * other:
            fail(f"time_fn() returned {what} of the timed calls.", fix)
    expect_close(value, medians[0], "the time time_fn() returned",
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
            fail("time_fn() started the clock while the warm-up was still running on "
                 "the device, so the first timed call also counts the rest of the warm-up.",
                 "synchronise once after the warm-up loop, before the first clock reading.")
        else:
            cause = ("synchronises, but reads the clock right after fn() with no "
                     "synchronisation in between: fn() only queues the work on the device.")
        fail(f"time_fn() {cause} The times measure how fast Python queues work, not "
             "how long the device runs it.", f"after each fn(), before reading the clock, "
             f"call {SYNC}.")
