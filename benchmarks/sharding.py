"""Lesson 09's figures: memory per rank and step time per strategy, the communication model.

    .venv/bin/python benchmarks/sharding.py [--runs 3]

Runs the lesson's own rank script (the `script` cell of solutions/09_sharding) with torchrun,
as the lesson does (one rank per GPU where there are two or more, else two gloo ranks on the
CPU), ``--runs`` times, and prints from the run with the fastest DDP step: each strategy's
bytes per rank and median step time (rank 0), the latency and bandwidth fitted by least squares
to each collective's sweep with the 3 MiB held-out size predicted against its measurement, and
one step's communication predicted by that model against what the profiler saw, and the
pipeline of one stage per rank: for each number of micro-batches, the step, each rank's busy
time, the share it waited against (p-1)/(m+p-1), and the largest difference from the whole model.
Names the machine and its load. A benchmark, not a test: run it on an otherwise idle machine.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np

from course_utils.lab import report, sharding

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "solutions" / "09_sharding" / "sharding.ipynb"
HELD_OUT = 3 * 2**20
UNITS = 5  # the lesson's model: four blocks and the root
# One step's collectives per strategy, as the lesson's Exercise 3 models them:
# (operation, calls per unit, times the parameters' size moves)
PLAN = {"ddp": (("all_reduce", 1, 1),),
        "zero2": (("all_gather", 1, 1), ("reduce_scatter", 1, 1)),
        "fsdp": (("all_gather", 2, 2), ("reduce_scatter", 1, 1))}


def lesson_script() -> str:
    """The notebook's rank script, without its %%writefile line."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    cell = next(c for c in cells if c["metadata"].get("nbgrader", {}).get("grade_id")
                == "script")
    _writefile, *lines = "".join(cell["source"]).splitlines()
    return "\n".join(lines) + "\n"


def fit(points: list) -> tuple[float, float]:
    """Least-squares (latency s, bandwidth B/s) of t = latency + size / bandwidth."""
    sizes, seconds = zip(*points, strict=True)
    slope, intercept = np.polyfit(sizes, seconds, 1)
    return float(intercept), float(1 / slope)


def predict(plan: tuple, units: int, parameter_bytes: int, models: dict) -> float:
    """Seconds of one step's collectives: each call costs latency + bytes / bandwidth."""
    return sum(calls * units * models[op][0] + moves * parameter_bytes / models[op][1]
               for op, calls, moves in plan)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    script = Path(tempfile.mkdtemp(prefix="bench-sharding-")) / "sharding_run.py"
    script.write_text(lesson_script())
    runs = [sharding.run_ranks(script, timeout=600) for _ in range(args.runs)]
    failed = [run for run in runs if not run.succeeded]
    for run in failed:
        print(f"a run FAILED (exit {run.returncode}):\n{run.output[-3000:]}")
    if len(failed) == len(runs):
        return 1
    best = min((run for run in runs if run.succeeded),
               key=lambda run: run.ranks[0].strategy("ddp").step_seconds)
    first = best.ranks[0]
    print(f"machine: {report.describe_machine('cpu')}; load average "
          f"{os.getloadavg()[0]:.1f}; {first.world_size} ranks on {first.device}; "
          f"best of {len(runs)} run(s)")
    print(f"\n{'strategy':<8} {'params MiB':>10} {'grads MiB':>10} {'AdamW MiB':>10} "
          f"{'step ms':>8} {'max |w - w_ddp|':>16}")
    for record in first.strategies:
        print(f"{record.strategy:<8} {record.parameter_bytes / 2**20:10.2f} "
              f"{record.gradient_bytes / 2**20:10.2f} {record.optimizer_bytes / 2**20:10.2f} "
              f"{record.step_seconds * 1e3:8.1f} {record.difference_from_ddp:16.1g}")
    models = {}
    print(f"\n{'collective':<15} {'latency ms':>10} {'GB/s':>6} {'3 MiB predicted':>16} "
          f"{'measured':>9}")
    for operation in sharding.OPERATIONS:
        points = [(c.size_bytes, c.seconds) for c in first.collectives
                  if c.operation == operation]
        models[operation] = latency, bandwidth = fit([p for p in points if p[0] != HELD_OUT])
        measured = next(seconds for size, seconds in points if size == HELD_OUT)
        print(f"{operation:<15} {latency * 1e3:10.3f} {bandwidth / 1e9:6.2f} "
              f"{(latency + HELD_OUT / bandwidth) * 1e3:13.2f} ms {measured * 1e3:6.2f} ms")
    parameter_bytes = first.strategy("ddp").parameter_bytes
    print(f"\n{'strategy':<9} {'profiled ms':>11} {'predicted ms':>12}  calls seen")
    for profiled in first.profiled:
        units = (sum(n for name, n in profiled.calls.items()
                     if "allreduce" in name.lower().replace("_", ""))  # gloo's or NCCL's
                 if profiled.strategy == "ddp" else UNITS)
        plan = PLAN.get(profiled.strategy)
        predicted = "" if plan is None else \
            f"{predict(plan, units, parameter_bytes, models) * 1e3:.2f}"
        print(f"{profiled.strategy:<9} {profiled.seconds * 1e3:11.2f} {predicted:>12}  "
              + ", ".join(f"{n} x {name}" for name, n in sorted(profiled.calls.items())))
    print_pipeline(best.ranks)
    return 0


def print_pipeline(ranks: list) -> None:
    """The pipeline's table: per number of micro-batches, the step (the slowest rank's), each
    rank's busy time and the share of the step it waited, against the bubble's formula."""
    stages = len(ranks)
    print(f"\npipeline of {stages} stages (GPipe), m micro-batches; max difference: from the whole "
          "model (loss, gradients, weights)")
    print(f"{'m':>2} {'step ms':>8} {'busy ms per rank':>17} {'waited per rank':>16} "
          f"{'(p-1)/(m+p-1)':>14} {'at once':>8} {'pm/(m+p-1)':>11} {'max difference':>15}")
    for records in zip(*(rank.pipeline for rank in ranks), strict=True):
        m = records[0].micro_batches
        step = max(r.step_seconds for r in records)
        at_once = sum(r.busy_seconds for r in records) / step  # stages computing together
        difference = max(max(r.loss_difference or 0.0, r.gradient_difference,
                             r.weight_difference) for r in records)
        print(f"{m:>2} {step * 1e3:8.1f} "
              f"{' '.join(f'{r.busy_seconds * 1e3:5.1f}' for r in records):>17} "
              f"{' '.join(f'{1 - r.busy_seconds / r.step_seconds:4.0%}' for r in records):>16} "
              f"{(stages - 1) / (m + stages - 1):14.0%} {at_once:8.2f} "
              f"{stages * m / (m + stages - 1):11.2f} {difference:15.1g}")


if __name__ == "__main__":
    raise SystemExit(main())
