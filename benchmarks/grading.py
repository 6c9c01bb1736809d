"""Grading throughput: N generated submissions of two lessons, with --jobs 1 and --jobs 2.

    .venv/bin/python benchmarks/grading.py --per-lesson 10

Prints submissions per minute for each setting and their ratio. Run it on an otherwise idle
machine; it is a benchmark, not a test.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import nbformat

from course_utils.grading.runner import grade
from course_utils.paths import course_root

LESSONS = ("00_setup", "01_tensors_devices")


def make_submissions(root: Path, folder: Path, per_lesson: int) -> int:
    """Alternate solutions and blank releases, per_lesson of each lesson."""
    count = 0
    for lesson in LESSONS:
        for source in sorted((root / "solutions" / lesson).glob("*.ipynb")):
            for index in range(per_lesson):
                origin = source if index % 2 == 0 else root / "notebooks" / lesson / source.name
                target = folder / f"student{index:03d}" / lesson / source.name
                target.parent.mkdir(parents=True, exist_ok=True)
                nbformat.write(nbformat.read(origin, as_version=4), target)
                count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--per-lesson", type=int, default=10, help="submissions per lesson")
    args = parser.parse_args()
    root = course_root()
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as folder:
        submissions = Path(folder) / "submissions"
        total = make_submissions(root, submissions, args.per_lesson)
        print(f"{total} submissions of {', '.join(LESSONS)} on {platform.node()} "
              f"({os.cpu_count()} cores, {platform.processor() or platform.machine()})")
        rates, grades = {}, {}
        for jobs in (1, 2):
            out = Path(folder) / f"out-{jobs}"
            started = time.perf_counter()
            rows = grade(root, submissions, out, jobs=jobs, seed=0)
            seconds = time.perf_counter() - started
            rates[jobs] = len(rows) / seconds * 60
            grades[jobs] = sorted((r.student, r.lesson, r.score, r.status) for r in rows)
            print(f"--jobs {jobs}: {seconds:6.1f} s, {rates[jobs]:5.1f} submissions/minute")
            shutil.rmtree(out)
        print(f"speed-up --jobs 2 / --jobs 1: {rates[2] / rates[1]:.2f}x; "
              f"identical grades: {grades[1] == grades[2]}")


if __name__ == "__main__":
    main()
