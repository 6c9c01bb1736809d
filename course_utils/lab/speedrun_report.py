"""Lesson 10 (the capstone speedrun): a row's figures as a mean with its interval, the table,
and its chart (offered through :mod:`course_utils.lab.speedrun`).

Each figure of a row is summarised by :func:`geometric_interval`: the geometric mean of the
runs and Student's t interval of their mean log, exponentiated (95 % by default). Times and rates
are positive and skewed (a slow run is further from the rest than a fast one can be), so their
logs are closer to normal; the interval never goes below zero, and it is on the scale of the
lesson's speed-ups (ratios of geometric means, Welch's test on the logs). It assumes independent
runs; with 5 runs it is wide on purpose. Comparing two rows (a speed-up and its interval, whether
it is shown) is the lesson's exercises: :func:`summary_table` takes those columns ready-made,
from the learner's own functions.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .args import is_real

__all__ = ["Interval", "bar_chart", "geometric_interval", "summary_table"]


@dataclass(frozen=True)
class Interval:
    """A (geometric) mean and its confidence interval."""

    mean: float
    low: float
    high: float
    runs: int

    def text(self, digits: int = 3) -> str:
        """'2.91 [1.5, 4.33]'; whole numbers with separators from 1000 on: '6,601 [3,625, ...]'."""
        def number(x: float) -> str:
            return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.{digits}g}"
        return f"{number(self.mean)} [{number(self.low)}, {number(self.high)}]"


def geometric_interval(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """The geometric mean of ``values`` (at least 2 positive numbers) and the two-sided Student's
    t interval of their mean log, exponentiated."""
    from scipy import stats  # scikit-learn's dependency: every install of the course has it

    values = list(values)
    if len(values) < 2 or not all(is_real(v) and math.isfinite(v) and v > 0 for v in values):
        raise ValueError(f"geometric_interval: values must be at least 2 positive finite "
                         f"numbers, got {values!r}.")
    if not 0 < confidence < 1:
        raise ValueError(f"geometric_interval: confidence must be between 0 and 1, got "
                         f"{confidence!r}.")
    logs = [math.log(v) for v in values]
    mean = statistics.fmean(logs)
    half = (stats.t.ppf((1 + confidence) / 2, len(logs) - 1) * statistics.stdev(logs)
            / math.sqrt(len(logs)))
    return Interval(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs))


def _mib(peaks: list[int | None]) -> str:
    known = [p for p in peaks if p is not None]
    if not known:
        return "n/a"
    return f"{max(known) / 2**20:.1f}"


def summary_table(records: Mapping[str, list], comparisons: Mapping[str, str] | None = None,
                  skipped: Sequence = ()) -> str:
    """One line per row: time to target and tokens/s (geometric mean [95 % interval]), the
    largest peak memory (MiB; n/a on the CPU, which has no allocator counters), runs that reached
    the target, then ``comparisons[name]`` (the learner's speed-up and verdict against the row
    before) and the rows ``skipped`` with their reasons."""
    comparisons = comparisons or {}
    width = max(len(name) for name in [*records, *(s.name for s in skipped)]) + 2
    lines = [(f"{'row':<{width}}{'lesson':<8}{'time to target (s)':<26}{'tokens/s':<28}"
             f"{'peak MiB':<10}{'reached':<9}vs the row before")]
    for name, runs in records.items():
        seconds = geometric_interval([run.seconds for run in runs])
        rate = geometric_interval([run.tokens_per_s for run in runs])
        reached = sum(run.reached for run in runs)
        lesson = getattr(runs[0], "lesson", "")
        lines.append(f"{name:<{width}}{lesson:<8}{seconds.text():<26}{rate.text():<28}"
                     f"{_mib([run.peak_bytes for run in runs]):<10}"
                     f"{f'{reached}/{len(runs)}':<9}{comparisons.get(name, '')}")
    lines += [f"{row.name:<{width}}{row.lesson:<8}skipped: {row.reason}" for row in skipped]
    return "\n".join(lines)


def bar_chart(records: Mapping[str, list], machine: str, *, ax=None):
    """Each row's geometric mean time to target with its 95 % interval as an error bar; the
    title names ``machine`` (:func:`course_utils.lab.report.describe_machine`)."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.5 * len(records) + 1.5))
    names = list(records)[::-1]  # the baseline on top
    intervals = [geometric_interval([run.seconds for run in records[name]]) for name in names]
    means = [i.mean for i in intervals]
    errors = [[i.mean - i.low for i in intervals], [i.high - i.mean for i in intervals]]
    ax.barh(names, means, xerr=errors, capsize=4, color="tab:blue",
            label="geometric mean time to target, 95 % interval")
    ax.set_xlabel("time to the target validation loss (s)")
    ax.set_ylabel("row (each adds one change)")
    ax.set_title(f"Cumulative changes, {intervals[0].runs} runs each\n{machine}", fontsize=9)
    ax.legend(loc="lower right")
    return ax
