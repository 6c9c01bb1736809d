"""Lesson 10's speedrun table: every cumulative change, several runs each, with its statistics.

    .venv/bin/python benchmarks/speedrun.py [--repeats 5] [--target 2.5] [--compile-on-cpu]

On this machine's device (course_utils.get_device), the lesson's character-level transformer is
trained on the standard library's source until its validation loss reaches ``--target``, under
each row of course_utils.speedrun.cumulative_changes (one thread on a CPU, as the lesson does).
Each row: time to target and tokens/s as a geometric mean with its 95 % interval, the
allocator's peak on an accelerator, the runs that reached the target, then the speed-up over the
row before (the ratio of geometric means with Welch's interval on the log times) and the verdict
of a one-sided Welch's t-test on the same log times at 5 % ("faster" or "not shown"). The
lesson's learners write those two; this script computes them with SciPy. Ends with the whole
table's wall time.
"""
from __future__ import annotations

import argparse
import itertools
import math
import os
import time

import numpy as np
from scipy import stats

from course_utils import get_device, report, speedrun


def compare(before: list[float], after: list[float]) -> str:
    logs_before, logs_after = np.log(before), np.log(after)
    low, high = stats.ttest_ind(logs_before, logs_after, equal_var=False).confidence_interval()
    ratio = math.exp(logs_before.mean() - logs_after.mean())
    p = stats.ttest_ind(logs_before, logs_after, equal_var=False, alternative="greater").pvalue
    shown = "faster" if p < 0.05 else "not shown"
    return f"{ratio:.2f}x [{math.exp(low):.2f}, {math.exp(high):.2f}] {shown} (p={p:.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--target", type=float, default=2.5)
    parser.add_argument("--compile-on-cpu", action="store_true")
    args = parser.parse_args()
    device = get_device()
    print("measured on:", report.describe_machine(device))
    rows = speedrun.cumulative_changes(device, compile_on_cpu=args.compile_on_cpu)
    recipes = [row for row in rows if isinstance(row, speedrun.Recipe)]
    skipped = [row for row in rows if isinstance(row, speedrun.Skipped)]
    started = time.perf_counter()
    results = speedrun.measure(recipes, speedrun.load_corpus(), target=args.target,
                               repeats=args.repeats, device=device,
                               threads=1 if device.type == "cpu" else None)
    seconds = time.perf_counter() - started
    names = list(results)
    comparisons = {after: compare([r.seconds for r in results[before]],
                                  [r.seconds for r in results[after]])
                   for before, after in itertools.pairwise(names)}
    comparisons[names[0]] = "(the baseline)"
    print(speedrun.summary_table(results, comparisons, skipped))
    whole = compare([r.seconds for r in results[names[0]]], [r.seconds for r in results[names[-1]]])
    print(f"all the changes together: {whole}")
    print(f"the table took {seconds:.0f} s ({args.repeats} runs of {len(recipes)} rows, warm-up "
          f"included), load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
