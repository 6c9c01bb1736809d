"""Grade lesson 07's reference DDP script many times in a row, under CPU load: it must never fail.

    .venv/bin/python benchmarks/ddp_reliability.py [--launches 200] [--parallel 2] [--spinners 2]

Each grading runs the check as the grader does (the simulated GPU rank, then torchrun on two
gloo ranks) on the solution notebook's script. ``--parallel`` gradings run at once, and
``--spinners`` busy-looping processes add load for as long as the loop runs. Prints one line
per grading (verdict, seconds, load average), stops counting at the first failure only if
``--stop`` is given, and ends with the count of gradings, the failures and the time taken.
A stress test, not a unit test: it takes tens of minutes on a busy two-core machine.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "solutions" / "07_multi_gpu" / "multi_gpu.ipynb"


def reference_script() -> str:
    """The solution cell of ``ddp_script`` without its %%writefile line and markers."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    cell = next(c for c in cells if c["metadata"].get("nbgrader", {}).get("grade_id")
                == "ddp_script")
    _writefile, *lines = "".join(cell["source"]).splitlines()
    markers = ("### BEGIN SOLUTION", "### END SOLUTION")
    return "\n".join(line for line in lines if line.strip() not in markers) + "\n"


def grade(script: str, seed: int) -> tuple[float, str, float]:
    """Grade the script once (hidden inputs for this seed): (fraction, message, seconds)."""
    from course_utils.checks import check_ddp_script
    from course_utils.checks.framework import run_probe

    started = time.monotonic()
    inputs = json.loads(json.dumps(check_ddp_script.make_inputs(seed, True)))
    verdict = check_ddp_script.evaluate(inputs, run_probe(check_ddp_script.probe, (script,),
                                                          inputs), True)
    return verdict.fraction, verdict.message, time.monotonic() - started


def spin(until: float) -> None:
    """Busy CPU work until ``until`` (time.time()), at low priority."""
    os.nice(5)
    while time.time() < until:
        sum(range(10_000))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=200)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--spinners", type=int, default=2)
    parser.add_argument("--max-minutes", type=float, default=120.0)
    parser.add_argument("--stop", action="store_true", help="stop at the first failure")
    options = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="ddp-reliability-"))
    script = folder / "ddp_train.py"
    script.write_text(reference_script())
    until = time.time() + 60 * options.max_minutes
    context = multiprocessing.get_context("spawn")
    spinners = [context.Process(target=spin, args=(until,), daemon=True)
                for _ in range(options.spinners)]
    for spinner in spinners:
        spinner.start()
    started, failures, done, loads = time.monotonic(), [], 0, []
    try:
        with ProcessPoolExecutor(options.parallel, mp_context=context) as pool:
            futures = {pool.submit(grade, str(script), seed): seed
                       for seed in range(options.launches)}
            for future in as_completed(futures):
                fraction, message, seconds = future.result()
                done += 1
                load = os.getloadavg()[0]
                loads.append(load)
                verdict = "ok" if fraction == 1 else f"FAIL {fraction:.3f}"
                print(f"{done:4d} seed {futures[future]:4d} {verdict} {seconds:6.1f} s "
                      f"load {load:5.1f}", flush=True)
                if fraction != 1:
                    failures.append((futures[future], message))
                    print(message, flush=True)
                    if options.stop:
                        for other in futures:
                            other.cancel()
                        break
                if time.time() > until:
                    break
    finally:
        for spinner in spinners:
            spinner.terminate()
    minutes = (time.monotonic() - started) / 60
    print(f"\n{done} graded launches, {len(failures)} failure(s), {minutes:.1f} min, "
          f"load average {min(loads, default=0):.1f}-{max(loads, default=0):.1f} "
          f"(mean {sum(loads) / max(len(loads), 1):.1f}) on {os.cpu_count()} CPUs, "
          f"{options.spinners} spinner(s), {options.parallel} at a time")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
