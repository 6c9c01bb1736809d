"""verdict(): 'faster' when a one-sided Welch's t-test on the times shows it, else 'not shown'."""
from __future__ import annotations

import math
import random

from ...probe import run_learner
from ..framework import check, expect_no_error, fail
from .welch import one_sided_p

WHAT = "verdict(before_s, after_s, alpha)"
RULE = ("stats.ttest_ind(before_s, after_s, equal_var=False, alternative='greater'), then "
        "'faster' if its pvalue < alpha, else 'not shown'.")
# Each kind of case: its label, and when a drawn pair is one (one-sided Welch p, Student's p).
KINDS = {
    "faster": ("a clear speed-up", lambda p, student: p < 1e-4),
    "same": ("no difference, the new mean a little lower", lambda p, student: 0.2 < p < 0.5),
    "slower": ("a clear slow-down", lambda p, student: p > 1 - 1e-4),
    "one_sided": ("a speed-up a one-sided test shows and a two-sided one does not",
                  lambda p, student: 0.026 < p < 0.045),
    "welch": ("unequal spreads, where Student's test would say faster",
              lambda p, student: p > 0.08 and student < 0.03),
    "alpha": ("alpha = 0.01 and p between 0.01 and 0.05", lambda p, student: 0.013 < p < 0.045),
}


def _draw(rng: random.Random, kind: str) -> dict:
    for _ in range(20_000):
        sizes = (8, 3) if kind == "welch" else (rng.randint(4, 8), rng.randint(4, 8))
        spreads = (0.02, 0.3) if kind == "welch" else (0.1, 0.1)
        ratio = {"faster": 1.4, "slower": 0.7, "welch": 1.15}.get(kind, rng.uniform(1.0, 1.15))
        before = [round(2.0 * math.exp(rng.gauss(0, spreads[0])), 4) for _ in range(sizes[0])]
        after = [round(2.0 / ratio * math.exp(rng.gauss(0, spreads[1])), 4)
                 for _ in range(sizes[1])]
        p = one_sided_p(before, after)
        if KINDS[kind][1](p, one_sided_p(before, after, equal_var=True)):
            return {"kind": kind, "before": before, "after": after,
                    "alpha": 0.01 if kind == "alpha" else 0.05}
    raise RuntimeError(f"no pair of kind {kind!r} drawn")  # pragma: no cover - never seen


def make_inputs(seed: int, hidden: bool) -> dict:
    rng = random.Random(4000 + seed if hidden else 11)
    kinds = list(KINDS) if hidden else ["faster", "same", "slower", "one_sided"]
    return {"cases": [_draw(rng, kind) for kind in kinds]}


def probe(verdict, inputs):
    """Call the answer on each recorded pair; report what it returned."""
    results = []
    for case in inputs["cases"]:
        run = run_learner(verdict, list(case["before"]), list(case["after"]),
                          alpha=case["alpha"])
        value = run.value
        results.append({"error": run.error, "value": value if isinstance(value, str) else None,
                        "shown": repr(value)[:80]})
    return results


FIXES = {  # (the kind of case, what the answer said) -> the cause, the fix
    ("same", "faster"): (("called a difference that the test does not show 'faster' (comparing "
                         "the means alone, or the wrong p-value)"), RULE),
    ("slower", "faster"): (("called a slow-down 'faster': a two-sided test (or abs()) says the "
                           "times differ, not which way"), ("test one side: alternative='greater' "
                           "(before's mean greater than after's).")),
    ("faster", "not shown"): (("did not call a clear speed-up 'faster': the test's side may be "
                              "reversed (alternative='less'), or the arguments swapped"), RULE),
    ("one_sided", "not shown"): (("did not call this speed-up 'faster': a two-sided test doubles "
                                 "the p-value"), "test one side: alternative='greater'."),
    ("welch", "faster"): (("called it 'faster' as Student's test (equal_var=True, one pooled "
                          "variance) does; with unequal spreads Welch's test does not show it"),
                          "pass equal_var=False (Welch's test)."),
    ("alpha", "faster"): ("ignored alpha: at alpha = 0.01 this p-value is not small enough",
                          "compare the p-value with the alpha argument, not with 0.05."),
}


@check(success=lambda inputs: (
    "verdict() follows a one-sided Welch's t-test on: "
    + "; ".join(KINDS[case["kind"]][0] for case in inputs["cases"]) + "."),
       make_inputs=make_inputs, probe=probe)
def check_verdict(inputs, observations, hidden):
    for case, seen in zip(inputs["cases"], observations, strict=True):
        label = KINDS[case["kind"]][0]
        expect_no_error(seen["error"], WHAT, where=f"With {label}")
        if seen["value"] not in ("faster", "not shown"):
            fail(f"With {label}, verdict returned {seen['shown']}, not 'faster' or 'not shown'.",
                 "return exactly one of the two strings 'faster' and 'not shown'.")
        expected = "faster" if one_sided_p(case["before"], case["after"]) < case["alpha"] \
            else "not shown"
        if seen["value"] != expected:
            cause, fix = FIXES.get((case["kind"], seen["value"]),
                                   ((f"returned {seen['value']!r} where the test says "
                                    f"{expected!r}"), RULE))
            fail(f"With {label}, verdict {cause}.", fix)
