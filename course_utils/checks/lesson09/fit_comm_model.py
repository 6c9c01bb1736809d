"""fit_comm_model(sizes, seconds): the least-squares line t = latency + size / bandwidth."""
from __future__ import annotations

import random

from ...probe import describe, run_learner
from ..framework import case, check, expect_no_error, fail
from .reading import number_in, shown

RELATIVE = 1e-3  # any exact least-squares method agrees with the reference far closer
HELD_OUT = 0.10  # the fitted model predicts the held-out size within 10 % of its true time


def make_inputs(seed: int, hidden: bool) -> dict:
    """Timings drawn from a true latency and bandwidth, with noise; one size held out."""
    rng = random.Random(seed if hidden else 0)
    latency = rng.uniform(2e-5, 1e-3) if hidden else 2e-4
    bandwidth = 10 ** rng.uniform(8.5, 10.5) if hidden else 1.5e9
    sizes = sorted({2 ** rng.randrange(8, 25) for _ in range(14)}) if hidden else [
        2 ** k for k in range(10, 24, 2)]
    noise = 0.03 if hidden else 0.02
    seconds = [(latency + size / bandwidth) * (1 + rng.uniform(-noise, noise)) for size in sizes]
    return {"sizes": sizes, "seconds": seconds, "latency": latency, "bandwidth": bandwidth,
            "held_out": 3 * 2 ** rng.randrange(18, 23)}


def probe(fit_comm_model, inputs):
    """Fit the drawn timings; describe the pair returned."""
    run = run_learner(fit_comm_model, list(inputs["sizes"]), list(inputs["seconds"]))
    return {"returned": describe(run.value), "error": run.error}


def least_squares(sizes: list, seconds: list) -> tuple[float, float]:
    """The reference: ordinary least squares of seconds on bytes, in float64."""
    n = len(sizes)
    mean_x, mean_y = sum(sizes) / n, sum(seconds) / n
    slope = (sum((x - mean_x) * (y - mean_y) for x, y in zip(sizes, seconds, strict=True))
             / sum((x - mean_x) ** 2 for x in sizes))
    return mean_y - slope * mean_x, 1 / slope


def _cause(latency: float, bandwidth: float, inputs: dict) -> str:
    """The mistake that gives this pair, named first."""
    reference_latency, reference_bandwidth = least_squares(inputs["sizes"], inputs["seconds"])
    if _close(latency, reference_bandwidth) and _close(bandwidth, reference_latency):
        return "the latency and the bandwidth are swapped: return (latency, bandwidth)"
    if _close(bandwidth, 1 / reference_bandwidth):
        return ("the bandwidth is the slope, seconds per byte: the bandwidth is its inverse, "
                "bytes per second")
    if _close(latency, reference_latency) and _close(bandwidth, reference_bandwidth / 8):
        return "the bandwidth is in bits per second: the sizes are bytes"
    if abs(latency) < 1e-12:
        return "the line was fitted through the origin: the latency is its intercept"
    if _close(latency, min(inputs["seconds"])):
        return "the latency is the smallest time measured, not the fitted line's intercept"
    sizes, seconds = inputs["sizes"], inputs["seconds"]
    mean_size, mean_time = sum(sizes) / len(sizes), sum(seconds) / len(seconds)
    if bandwidth and not _close(latency + mean_size / bandwidth, mean_time):
        return ("the line misses the data's centre (the mean size, the mean time), which a "
                "least-squares line passes through: latency = mean(t) - slope * mean(n)")
    return ("the slope is not the least-squares one, sum((n - mean n)(t - mean t)) / "
            "sum((n - mean n)^2) over all the points")


def _close(value: float, target: float) -> bool:
    return abs(value - target) <= RELATIVE * abs(target)


def _success(inputs: dict) -> str:
    return (f"fit_comm_model() returns the least-squares (latency, bandwidth) of "
            f"{len(inputs['sizes'])} timings, and predicts the held-out "
            f"{inputs['held_out'] / 2**20:g} MiB within {HELD_OUT:.0%}.")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_fit_comm_model(inputs, observations, hidden):
    expect_no_error(observations["error"], "fit_comm_model()")
    returned = observations["returned"]
    items = returned.get("items") if returned["type"] in ("tuple", "list") else None
    if items is None or len(items) != 2:
        fail(f"fit_comm_model() returned {returned['type']}, not a pair of two numbers.",
             "return (latency in seconds, bandwidth in bytes per second), as plain floats.")
    if None in [number_in(item) for item in items]:
        fail("fit_comm_model() returned a pair that is not two finite numbers (NaN or "
             "infinite: a division by zero, such as a slope whose denominator "
             "sum((n - mean n)^2) came out zero).",
             "centre the sizes on their mean before summing their squares; return floats.")
    latency, bandwidth = (number_in(item) for item in items)
    reference_latency, reference_bandwidth = least_squares(inputs["sizes"], inputs["seconds"])
    with case("the least-squares latency and bandwidth", 2):
        if not (_close(latency, reference_latency) and _close(bandwidth, reference_bandwidth)):
            expected = "" if hidden else (f" (expected {reference_latency:.4g} s and "
                                          f"{reference_bandwidth:.4g} B/s)")
            fail(f"{_cause(latency, bandwidth, inputs)}: fit_comm_model() returned latency "
                 f"{shown(latency)} s and bandwidth {shown(bandwidth)} B/s{expected}.",
                 "fit seconds = a + b * size by least squares over all the points (e.g. "
                 "numpy.polyfit(sizes, seconds, 1) gives b, a); latency = a, bandwidth = 1 / b.")
    with case("predicts a size it was not fitted on", 1):
        size, truth = inputs["held_out"], inputs["latency"] + inputs["held_out"] / inputs[
            "bandwidth"]
        predicted = latency + size / bandwidth if bandwidth else float("inf")
        if abs(predicted - truth) > HELD_OUT * truth:
            fail(f"{_cause(latency, bandwidth, inputs)}: with it, {size / 2**20:g} MiB takes "
                 f"{predicted:.4g} s by the model, against {truth:.4g} s measured.",
                 "return the intercept as the latency (seconds) and 1 / slope as the bandwidth "
                 "(bytes per second); time = latency + size / bandwidth.")
