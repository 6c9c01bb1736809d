"""verdict(): 'faster' when a one-sided Welch's t-test on the log times shows it, else 'not shown'.

On the logs, the verdict agrees with exercise 1's interval (Welch's, on the logs): a 95 % interval
above 1 always comes with 'faster'. On the raw seconds, one slow run can make them disagree (the
H200 reference run of 27 November: 3.09x [1.30, 7.35] and 'not shown').
"""
from __future__ import annotations

import math
import random

from ...probe import run_learner
from ..framework import check, expect_no_error, fail
from .welch import one_sided_p

WHAT = "verdict(before_s, after_s, alpha)"
RULE = ("stats.ttest_ind(np.log(before_s), np.log(after_s), equal_var=False, "
        "alternative='greater'), then 'faster' if its pvalue < alpha, else 'not shown'.")
# Each kind of case: its label, and when a drawn pair is one, from the one-sided p-values of
# Welch's test on the logs, Student's test on the logs and Welch's test on the raw seconds.
KINDS = {
    "faster": ("a clear speed-up", lambda p, student, raw: p < 1e-4),
    "same": ("no difference, the new mean a little lower", lambda p, student, raw: 0.2 < p < 0.5),
    "slower": ("a clear slow-down", lambda p, student, raw: p > 1 - 1e-4),
    "one_sided": ("a speed-up a one-sided test shows and a two-sided one does not",
                  lambda p, student, raw: 0.026 < p < 0.045),
    "scale": ("skewed times (a slow run), where the test on the raw seconds decides otherwise",
              lambda p, student, raw: (p < 0.05) != (raw < 0.05) and
              min(abs(p - 0.05), abs(raw - 0.05)) > 0.01),
    "welch": ("unequal spreads, where Student's test would say faster",
              lambda p, student, raw: p > 0.08 and student < 0.03),
    "alpha": ("alpha = 0.01 and p between 0.01 and 0.05",
              lambda p, student, raw: 0.013 < p < 0.045),
}
SPREADS = {"welch": (0.02, 0.3), "scale": (0.7, 0.1)}  # of the log times, before and after


def p_values(before: list[float], after: list[float]) -> tuple[float, float, float]:
    """(Welch's p on the logs, Student's p on the logs, Welch's p on the seconds): one-sided."""
    logs_before, logs_after = [math.log(x) for x in before], [math.log(x) for x in after]
    return (one_sided_p(logs_before, logs_after),
            one_sided_p(logs_before, logs_after, equal_var=True), one_sided_p(before, after))


def _draw(rng: random.Random, kind: str) -> dict:
    for _ in range(20_000):
        sizes = (8, 3) if kind == "welch" else (rng.randint(4, 8), rng.randint(4, 8))
        spreads = SPREADS.get(kind, (0.1, 0.1))
        ratio = {"faster": 1.4, "slower": 0.7, "welch": 1.15, "scale": rng.uniform(1.0, 1.6)
                 }.get(kind, rng.uniform(1.0, 1.15))
        before = [round(2.0 * math.exp(rng.gauss(0, spreads[0])), 4) for _ in range(sizes[0])]
        after = [round(2.0 / ratio * math.exp(rng.gauss(0, spreads[1])), 4)
                 for _ in range(sizes[1])]
        p, student, raw = p_values(before, after)
        alpha = 0.01 if kind == "alpha" else 0.05
        # outside the "scale" cases, the raw seconds decide alike: that mistake is named there
        if KINDS[kind][1](p, student, raw) and (kind == "scale" or (p < alpha) == (raw < alpha)):
            return {"kind": kind, "before": before, "after": after,
                    "alpha": 0.01 if kind == "alpha" else 0.05}
    raise RuntimeError(f"no pair of kind {kind!r} drawn")  # pragma: no cover - never seen


def make_inputs(seed: int, hidden: bool) -> dict:
    rng = random.Random(4000 + seed if hidden else 11)
    kinds = list(KINDS) if hidden else ["faster", "same", "slower", "one_sided", "scale"]
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
                         "the means alone, the wrong p-value, or one list taken on the log "
                         "scale and the other not)"), RULE),
    ("slower", "faster"): (("called a slow-down 'faster': a two-sided test (or abs()) says the "
                           "times differ, not which way"), ("test one side: alternative='greater' "
                           "(before's mean greater than after's).")),
    ("faster", "not shown"): (("did not call a clear speed-up 'faster': the test's side may be "
                              "reversed (alternative='less'), the arguments swapped, or one list "
                              "taken on the log scale and the other not"), RULE),
    ("scale", "faster"): (("tested the raw seconds, it seems: one slow run skews them, and the "
                          "test on the log times (the scale of exercise 1's interval) does not "
                          "show this speed-up"), "take the logs first: " + RULE),
    ("scale", "not shown"): (("tested the raw seconds, it seems: one slow run inflates their "
                              "spread, and the test on the log times (the scale of exercise 1's "
                              "interval) does show this speed-up"), "take the logs first: " + RULE),
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
        expected = "faster" if p_values(case["before"], case["after"])[0] < case["alpha"] \
            else "not shown"
        if seen["value"] != expected:
            cause, fix = FIXES.get((case["kind"], seen["value"]),
                                   ((f"returned {seen['value']!r} where the test says "
                                    f"{expected!r}"), RULE))
            fail(f"With {label}, verdict {cause}.", fix)
