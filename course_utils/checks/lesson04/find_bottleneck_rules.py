"""find_bottleneck's verdict on one trial: the rules, kept apart from the inputs and the probe."""
from __future__ import annotations

from ..framework import expect_no_error, fail

# The one verdict a busy machine can cause by itself (the others are the answer's own doing).
FAR_OFF = "time per batch is far from what the check measured"


def _near(value: float, truth: float, share: float = 0.4, slack: float = 0.002) -> bool:
    """Within ``share`` and ``slack`` seconds: the clocks of the check and the answer differ."""
    return abs(value - truth) <= share * truth + slack


def _cause_of_a_free_step(log: list[str]) -> str:
    if "sync" not in log:
        return "it never waited for the device it was given"
    if all(log[i + 1:i + 2] == ["sync"] for i, event in enumerate(log) if event == "step"):
        return "it waits for the device only after reading the clock"
    return "it waits for the device before each step, but not after it"


def verify_trial(case: dict, seen: dict, where: str, hidden: bool) -> None:
    """Fail (cause, then fix) when one trial's answer is wrong."""
    expect_no_error(seen["error"], "find_bottleneck()", where=where, hints={
        "RuntimeError": None if case["machine"]["gpus"] else "torch.cuda.synchronize() fails "
        "where there is no CUDA GPU: wait in a way that works on every device, "
        "synchronize(device) from course_utils (it does nothing on the CPU)."})
    if seen["reported"] is None or not seen["loads"]:
        fail(f"{where}, find_bottleneck() returned {seen['type']}"
             + ("" if seen["loads"] else " without taking a batch from the loader") + ".",
             "time each batch of the loader and each step, and return a tuple (culprit, "
             "loader_seconds, model_seconds): 'loader' or 'model', and two means per batch.")
    culprit, loader_s, model_s = seen["reported"]
    work = sum(seen["work"]) / len(seen["work"])  # per step, on the device
    truth = {"model": work + seen["late"],  # a synchronised clock also sees the wait overshoot
             "loader": sum(seen["loads"]) / len(seen["loads"])}
    straight = _near(loader_s, truth["loader"]) and _near(model_s, truth["model"])
    if not straight and _near(loader_s, truth["model"], 0.25, 0) \
            and _near(model_s, truth["loader"], 0.25, 0):
        fail(f"{where}, find_bottleneck() returned the model's time where the loader's belongs, "
             "and the other way round.",
             "return (culprit, loader_seconds, model_seconds), in this order.")
    if case["device"] != "cpu" and model_s < 0.5 * work:
        busy = "longer" if hidden else f"{case['model_ms']} ms"
        fail(f"{where}, find_bottleneck() measured almost no time per step, yet the device was "
             f"busy {busy} per step: {_cause_of_a_free_step(seen['log'])}. A GPU step returns "
             "as soon as its work is queued, so the clock stopped too early.",
             "call synchronize(device), with the function's `device` argument, after "
             "step(batch) and before reading the clock.")
    _expect_stage_times(case, seen, where, hidden, loader_s, model_s, truth)
    slower = "loader" if loader_s > model_s else "model"
    if culprit != slower:
        fail(f"{where}, find_bottleneck() named {culprit!r} as the bottleneck, but its own "
             f"measurements say the {slower} took longer per batch.",
             "return 'loader' or 'model': the stage that took longer per batch.")


def _expect_stage_times(case: dict, seen: dict, where: str, hidden: bool, loader_s: float,
                        model_s: float, truth: dict[str, float]) -> None:
    """Each stage's time per batch near what the check measured, or the likely slip named."""
    for stage, value in (("model", model_s), ("loader", loader_s)):
        if _near(value, truth[stage]):
            continue
        if stage == "loader" and _near(value, truth["loader"] + truth["model"]):
            fail(f"{where}, the loader time find_bottleneck() reported includes the step.",
                 "stop the loader's clock as soon as the batch arrives, and start the step's "
                 "clock then.")
        if _near(value, truth[stage] * len(seen["loads"])):
            fail(f"{where}, find_bottleneck() reported the {stage} time summed over "
                 f"{len(seen['loads'])} batches.",
                 "divide each total by the number of batches: return means per batch.")
        took = "" if hidden else f" (it took about {case[stage + '_ms']} ms)"
        fail(f"{where}, find_bottleneck()'s {stage} {FAR_OFF}{took}.",
             "time next(batch) from the loader and step(batch) separately, "
             "with time.perf_counter(), and return the mean of each per batch.")
