"""find_bottleneck's verdict on one simulated machine: the rules, kept apart from the inputs and
the probe. The probe runs the answer on a simulated clock, so every stage's cost is exact."""
from __future__ import annotations

from ..framework import expect_no_error, fail

SYNC = ("synchronize(device) from course_utils, with the function's `device` argument: it "
        "waits for the device's queued work and does nothing on the CPU "
        "(torch.cuda.synchronize() knows CUDA only, and torch.accelerator.synchronize(device) "
        "raises for a CPU device)")


def _near(value: float, truth: float) -> bool:
    return abs(value - truth) <= 1e-3 * truth + 1e-7


def _events(seen: dict, kind: str) -> list[int]:
    return [index for index, event in enumerate(seen["log"]) if event["event"] == kind]


def _cause_of_a_free_step(seen: dict) -> str:
    """Why the clock stopped before the step's work ran, from the order of events."""
    log, queue = seen["log"], seen["queue"]
    syncs = [event for event in log if event["event"] == "sync"]
    synced = sorted({str(event["device"]) for event in syncs})
    if not syncs:
        return "it never waited for the device it was given"
    if queue not in synced:
        return (f"it waited for {', '.join(synced)}, but the step's work runs on {queue}: pass "
                "the function's `device` to synchronize()")
    waits = [i for i, event in enumerate(log) if event["event"] == "sync"
             and event["device"] == queue]
    for step in _events(seen, "step"):
        read = next((i for i in _events(seen, "clock") if i > step), None)
        if read is None or queue not in log[read]["pending"]:
            continue
        if any(step < wait < read for wait in waits):
            break  # it waited, yet read the clock while the work was still queued: not a cause
        loads = [i for i in _events(seen, "load") if i > read]
        if any(read < wait < (loads[0] if loads else len(log)) for wait in waits):
            return "it waits for the device only after reading the clock"
        if any(wait < step for wait in waits):
            return "it waits for the device before each step, but not after it"
        return "it reads the clock right after step() without waiting for the device"
    return ("it waited for the device, but the step time it reported does not span that wait "
            "(is it read from the same clock as the rest?)")


def _expect_synchronisation_works(seen: dict, device: str) -> None:
    syncs = [seen["log"][i] for i in _events(seen, "sync")]
    if seen["error"] and syncs and syncs[-1]["device"] is None:  # the synchronisation raised
        fail(f"find_bottleneck() called {syncs[-1]['api']}(), which raises "
             f"{seen['error']['type']} for device {device!r} on this machine.",
             f"wait with {SYNC}.")


def verify(case: dict, seen: dict, hidden: bool) -> None:
    """Fail (cause, then fix) when the answer is wrong on this machine."""
    _expect_synchronisation_works(seen, case["device"])
    expect_no_error(seen["error"], "find_bottleneck()")
    loads = len(_events(seen, "load"))
    if seen["stopped"]:
        fail("find_bottleneck() did not finish: it read the clock thousands of times.",
             "take each batch from the loader once, and read the clock around each stage.")
    if seen["reported"] is None or not loads:
        fail(f"find_bottleneck() returned {seen['type']}"
             + ("" if loads else " without taking a batch from the loader") + ".",
             "time each batch of the loader and each step, and return a tuple (culprit, "
             "loader_seconds, model_seconds): 'loader' or 'model', and two means per batch.")
    if not _events(seen, "clock"):
        fail("find_bottleneck() never read a clock that the check follows "
             "(time.perf_counter, time.time, time.monotonic, their _ns forms or "
             "timeit.default_timer); time.process_time, for one, counts only this process's "
             "CPU time, not the time spent waiting.",
             "read time.perf_counter() before and after each stage.")
    culprit, loader_s, model_s = seen["reported"]
    truth = {"loader": case["loader_ms"] / 1e3, "model": case["model_ms"] / 1e3 + 2e-5}
    if not (_near(loader_s, truth["loader"]) and _near(model_s, truth["model"])) \
            and _near(loader_s, truth["model"]) and _near(model_s, truth["loader"]):
        fail("find_bottleneck() returned the model's time where the loader's belongs, "
             "and the other way round.",
             "return (culprit, loader_seconds, model_seconds), in this order.")
    counted = [truth[stage] * loads / value for stage, value in (("loader", loader_s), (
        "model", model_s)) if value]  # what each total was divided by (1: totals, told below)
    if len(counted) == 2 and abs(counted[0] - counted[1]) < 1e-3 * abs(counted[0]) and abs(
            counted[0] - round(counted[0])) < 1e-3 and round(counted[0]) not in (1, loads):
        fail(f"find_bottleneck() divided both stage totals by {round(counted[0])}, but the "
             f"loader gave {loads} batches.",
             "count one per batch taken from the loader, and divide each total by that count.")
    if case["device"] != "cpu" and model_s < 0.5 * truth["model"]:
        busy = "longer" if hidden else f"{case['model_ms']} ms"
        fail(f"find_bottleneck() measured almost no time per step, yet the device was "
             f"busy {busy} per step: {_cause_of_a_free_step(seen)}. A GPU step returns "
             "as soon as its work is queued, so the clock stopped too early.",
             f"after step(batch) and before reading the clock, wait with {SYNC}.")
    _expect_stage_times(case, loads, hidden, {"loader": loader_s, "model": model_s},
                        truth, seen)
    slower = "loader" if loader_s > model_s else "model"
    if culprit != slower:
        fail(f"find_bottleneck() named {culprit!r} as the bottleneck, but its own "
             f"measurements say the {slower} took longer per batch.",
             "return 'loader' or 'model': the stage that took longer per batch.")


def _expect_stage_times(case: dict, loads: int, hidden: bool,
                        reported: dict[str, float], truth: dict[str, float], seen: dict) -> None:
    """Each stage's time per batch as the simulated clock gave it, or the slip named."""
    for stage in ("model", "loader"):
        value = reported[stage]
        if _near(value, truth[stage]):
            continue
        step = truth["model"]  # in every wait for a batch but the first, or in all of them
        if stage == "loader" and any(_near(value, truth["loader"] + share * step)
                                     for share in (1, (loads - 1) / loads)):
            fail("The loader time find_bottleneck() reported includes the step.",
                 "stop the loader's clock as soon as the batch arrives, and start the step's "
                 "clock then.")
        if _near(value, truth[stage] * loads):
            fail(f"find_bottleneck() reported the {stage} time summed over "
                 f"{loads} batches.",
                 "divide each total by the number of batches: return means per batch.")
        if _near(value, truth[stage] * 1e3):
            fail(f"find_bottleneck() reported the {stage} time in milliseconds.",
                 "return seconds, as time.perf_counter() gives them.")
        took = "" if hidden else f" (each took {case[stage + '_ms']} ms)"
        if stage == "model" and case["device"] != "cpu":  # the order of events says why
            took += f": {_cause_of_a_free_step(seen)}"
        fail(f"find_bottleneck()'s {stage} time per batch is not what the {stage} took{took}.",
             "time next(batch) from the loader and step(batch) separately, "
             "with time.perf_counter(), and return the mean of each per batch.")
