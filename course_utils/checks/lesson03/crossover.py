"""crossover(sizes, cpu_times, acc_times): where the accelerator starts to stay faster."""
from __future__ import annotations

import random

from ...probe import describe, run_learner, whole_number
from ..framework import case, check, expect_no_error, expect_not_a_stub, fail

SIZES = [16, 32, 64, 128, 256, 512, 1024]
CPU = [4e-6, 1.1e-5, 4.6e-5, 2.4e-4, 1.8e-3, 1.4e-2, 0.11]
VISIBLE = [  # (what the sweep shows, accelerator times)
    ("a clean crossing", [2.1e-5, 2.2e-5, 5.1e-5, 6.3e-5, 9.8e-5, 4.1e-4, 2.9e-3]),
    ("an accelerator that is never faster", [9e-5, 1e-4, 1.6e-4, 6e-4, 4e-3, 3e-2, 0.2]),
    ("one noisy point", [2.1e-5, 9e-6, 5.1e-5, 6.3e-5, 9.8e-5, 4.1e-4, 2.9e-3]),
    ("a tie just before the crossing", [2.1e-5, 2.2e-5, 5.1e-5, 2.4e-4, 9.8e-5, 4.1e-4, 2.9e-3]),
]
PATTERNS = ["a clean crossing", "an accelerator that is never faster", "one noisy point",
            "a sweep that crosses back", "an accelerator faster from the start",
            "a tie just before the crossing"]


def make_inputs(seed: int, hidden: bool) -> dict:
    if not hidden:
        return {"cases": [{"what": what, "sizes": SIZES, "cpu": CPU, "acc": acc}
                          for what, acc in VISIBLE], "hidden": False}
    rng = random.Random(seed)
    return {"cases": [_sweep(rng, what) for what in rng.sample(PATTERNS, len(PATTERNS))],
            "hidden": True}


def _sweep(rng: random.Random, what: str) -> dict:
    """A made-up sweep: the CPU's time grows like n**3, the accelerator wins from index k."""
    count, start = rng.randint(6, 9), rng.choice([16, 24, 32])
    sizes = [start * 2**i for i in range(count)]
    cpu = [float(f"{1e-10 * n**3 + 3e-6:.3g}") for n in sizes]
    k = {"an accelerator that is never faster": count,
         "an accelerator faster from the start": 0}.get(what, rng.randint(2, count - 2))
    acc = [float(f"{t * (rng.uniform(1.3, 6) if i < k else 1 / rng.uniform(1.3, 20)):.3g}")
           for i, t in enumerate(cpu)]
    if what == "one noisy point":
        acc[rng.randrange(k - 1)] = cpu[0] / 2  # faster once, by chance, then slower again
    if what == "a sweep that crosses back":
        acc[-1] = cpu[-1] * rng.uniform(1.1, 2)  # slower again at the largest size
    if what == "a tie just before the crossing":
        acc[k - 1] = cpu[k - 1]
    return {"what": what, "sizes": sizes, "cpu": cpu, "acc": acc}


def probe(crossover, inputs):
    """Call crossover() on each sweep (fresh lists each time) and report what it returned."""
    results = []
    for sweep in inputs["cases"]:
        run = run_learner(crossover, list(sweep["sizes"]), list(sweep["cpu"]), list(sweep["acc"]))
        results.append({"returned": describe(run.value), "size": whole_number(run.value),
                        "error": run.error})
    return results


def expected_crossover(sizes: list[int], cpu: list[float], acc: list[float]) -> int | None:
    """The rule, on the trusted side: where the run of wins that reaches the largest size starts."""
    answer = None
    for size, cpu_time, acc_time in zip(reversed(sizes), reversed(cpu), reversed(acc),
                                        strict=True):
        if not acc_time < cpu_time:
            break
        answer = size
    return answer


def _success(inputs: dict) -> str:
    shown = "; ".join(sweep["what"] + ("" if inputs["hidden"] else " → " + str(
        expected_crossover(sweep["sizes"], sweep["cpu"], sweep["acc"])))
        for sweep in inputs["cases"])
    return (f"crossover() returns the smallest size from which the accelerator stays faster, "
            f"or None, for: {shown}.")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_crossover(inputs, observations, hidden):
    expect_not_a_stub([result["error"] for result in observations], "crossover()")
    nones = sum(result["returned"]["type"] == "NoneType" and result["error"] is None
                for result in observations)
    every = f" for all {nones} sweeps" if nones == len(observations) else ""
    for sweep, result in zip(inputs["cases"], observations, strict=True):
        with case(sweep["what"]):
            _verify(sweep, result, hidden, every)


def _verify(sweep: dict, result: dict, hidden: bool, every: str = "") -> None:
    """``every``: " for all N sweeps" when crossover() returned None for each of them."""
    sizes, cpu, acc = sweep["sizes"], sweep["cpu"], sweep["acc"]
    expected = expected_crossover(sizes, cpu, acc)
    expect_no_error(result["error"], "crossover()", hints=None if expected is not None else {
        "Exception": "when the accelerator never stays faster up to the largest size, "
                     "return None."})
    kind, value = result["returned"]["type"], result["size"]
    if value is None and kind != "NoneType":
        fail(f"crossover() returned {kind}.", "return one of the sizes (an int), or None.")
    if value == expected:
        return
    if value is None:
        fail(f"crossover() returned None{every}, but acc_times < cpu_times from "
             f"{'one of the sizes' if hidden else expected} up to the largest size: the answer "
             "is that size, not None.",
             "find the smallest size i such that acc_times[j] < cpu_times[j] for every j >= i.")
    if value not in sizes:
        fail(f"crossover() returned {value}, which is not one of the sizes" +
             (f": it looks like the position in the list; return sizes[{value}]."
              if 0 <= value < len(sizes) else "."), "return an element of sizes, or None.")
    at = sizes.index(value)
    if acc[at] == cpu[at]:
        fail(f"crossover() returned {value}, where both took the same time: equal is not "
             "faster.", "compare with a strict <: acc_times[i] < cpu_times[i].")
    if not acc[at] < cpu[at]:
        fail(f"crossover() returned {value}, where the accelerator is slower than the CPU "
             f"({acc[at]:.3g} s against {cpu[at]:.3g} s).",
             "the accelerator is faster where acc_times[i] < cpu_times[i].")
    later = next((size for size, c, a in zip(sizes[at:], cpu[at:], acc[at:], strict=True)
                  if not a < c), None)
    first = next(size for size, c, a in zip(sizes, cpu, acc, strict=True) if a < c)
    if later is not None:
        fail(f"crossover() returned {value}, " + "the first size where acc_times < cpu_times, " * (
             value == first) + f"but the accelerator is slower again at {later} (acc_times >= "
             "cpu_times there): a faster point followed by slower ones is noise, not the answer.",
             "return the smallest size from which the accelerator is faster at every larger "
             "size too (None if it is slower at the largest).")
    fail(f"crossover() returned {value}, but the accelerator is already faster at "
         f"{sizes[at - 1]}, the size before it, and at every size after that.",
         "return the smallest size of the run of wins that reaches the largest size.")
