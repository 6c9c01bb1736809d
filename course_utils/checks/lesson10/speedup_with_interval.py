"""speedup_with_interval(): the geometric-mean speed-up and Welch's interval on the log times."""
from __future__ import annotations

import math
import random

from ...probe import run_learner, type_name
from ..framework import check, expect_no_error, fail
from .welch import log_interval

WHAT = "speedup_with_interval(before_s, after_s, confidence)"
FORMULA = ("speedup = exp(mean(log before_s) - mean(log after_s)); (low, high) = Welch's "
           "interval of that difference of mean logs, exponentiated.")


def _times(rng: random.Random, count: int, typical: float, spread: float) -> list[float]:
    return [round(typical * math.exp(rng.gauss(0.0, spread)), 5) for _ in range(count)]


def make_inputs(seed: int, hidden: bool) -> dict:
    """Recorded timings: one pair with a known speed-up, one with none (and, hidden, unequal
    sizes and spreads, and a 90 % interval)."""
    rng = random.Random(3000 + seed if hidden else 10)
    typical = rng.uniform(1.0, 4.0)
    cases = [{"label": "a known 1.3x speed-up", "before": _times(rng, 5, typical, 0.08),
              "after": _times(rng, 5, typical / 1.3, 0.08), "confidence": 0.95},
             {"label": "no difference", "before": _times(rng, 6, typical, 0.1),
              "after": _times(rng, 4, typical, 0.1), "confidence": 0.95}]
    if hidden:
        cases.append({"label": "unequal sizes and spreads, a 90 % interval",
                      "before": _times(rng, 7, typical, 0.25),
                      "after": _times(rng, 3, typical / 1.1, 0.03), "confidence": 0.9})
    return {"cases": cases}


def probe(speedup_with_interval, inputs):
    """Call the answer on each recorded pair; report its three numbers (or what it returned)."""
    results = []
    for case in inputs["cases"]:
        run = run_learner(speedup_with_interval, list(case["before"]), list(case["after"]),
                          confidence=case["confidence"])
        numbers = None
        if isinstance(run.value, (tuple, list)) and len(run.value) == 3:
            try:
                numbers = [float(number) for number in run.value]
            except (TypeError, ValueError, RuntimeError):
                numbers = None
        results.append({"error": run.error, "type": type_name(run.value), "numbers": numbers})
    return results


def _close(numbers: list[float], expected: tuple[float, ...]) -> bool:
    return all(math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
               for a, b in zip(numbers, expected, strict=True))


def _speedup_cause(got: float, case: dict) -> tuple[str, str]:
    expected = log_interval(case["before"], case["after"], case["confidence"])[0]
    arithmetic = (sum(case["before"]) / len(case["before"])) / (
        sum(case["after"]) / len(case["after"]))
    if math.isclose(got, 1 / expected, rel_tol=1e-6):
        return (("the speed-up is upside down: it is after/before, below 1 when the new times "
                "are shorter."), "divide before by after: exp(mean(log before) - mean(log after)).")
    if math.isclose(got, arithmetic, rel_tol=1e-6):
        return (("the speed-up is the ratio of the arithmetic means, not of the geometric means "
                "(the mean of the logs)."), ("take the mean of the log times: "
                "exp(mean(log before) - mean(log after))."))
    return "the speed-up is not the geometric-mean ratio before/after.", FORMULA


def _interval_cause(got: list[float], case: dict) -> tuple[str, str]:
    before, after, confidence = case["before"], case["after"], case["confidence"]
    speedup, low, high = log_interval(before, after, confidence)
    known = {
        "uses Student's pooled variance (equal_var=True), not Welch's": (
            log_interval(before, after, confidence, equal_var=True),
            ("pass equal_var=False to ttest_ind, or use each sample's own variance and the "
            "Welch-Satterthwaite degrees of freedom.")),
        "uses the normal quantile (1.96 for 95 %), not Student's t for these few runs": (
            log_interval(before, after, confidence, normal=True),
            "take the quantile from stats.t.ppf((1 + confidence) / 2, degrees of freedom)."),
        "ignores the confidence argument (a 95 % interval where another level was asked)": (
            log_interval(before, after, 0.95),
            "pass confidence on: confidence_interval(confidence_level=confidence)."),
        "is the interval of the log ratio, not exponentiated": (
            (speedup, math.log(low), math.log(high)),
            "return exp(low) and exp(high): the interval was computed on log times."),
        "is upside down (the interval of after/before)": (
            (speedup, 1 / high, 1 / low),
            "take the difference log before - log after, not the other way round."),
    }
    for cause, (expected, fix) in known.items():
        if _close(got, expected):
            return f"the interval (low, high) {cause}.", fix
    return ("the interval (low, high) is not Welch's interval of the mean log difference, "
            "exponentiated."), FORMULA


@check(success=lambda inputs: (
    "speedup_with_interval() returns the geometric-mean speed-up and Welch's interval on: "
    + "; ".join(case["label"] for case in inputs["cases"]) + "."),
       make_inputs=make_inputs, probe=probe)
def check_speedup_with_interval(inputs, observations, hidden):
    for case, seen in zip(inputs["cases"], observations, strict=True):
        where = f"With {case['label']}"
        expect_no_error(seen["error"], WHAT, where=where)
        if seen["numbers"] is None:
            fail(f"{where}, speedup_with_interval returned {seen['type']}, not three numbers.",
                 "return a tuple (speedup, low, high) of floats.")
        expected = log_interval(case["before"], case["after"], case["confidence"])
        got = seen["numbers"]
        if not math.isclose(got[0], expected[0], rel_tol=1e-6):
            cause, fix = _speedup_cause(got[0], case)
            fail(f"{where}, {cause}", fix)
        if not _close(got, expected):
            cause, fix = _interval_cause(got, case)
            shown = "" if hidden else f" (expected about ({expected[1]:.4g}, {expected[2]:.4g}))"
            fail(f"{where}, {cause}{shown}", fix)
