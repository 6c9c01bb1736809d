"""Grading throughput, side by side in one run: nbgrader autograde and `course grade`.

    .venv/bin/python benchmarks/grading.py --per-lesson 6
    .venv/bin/python benchmarks/grading.py --lessons all --per-lesson 2 --speed-only

Generates submissions of lessons 00 and 01, or those ``--lessons`` names (half the
instructor's solutions, half blank releases) and grades the same files with:

* ``nbgrader autograde`` (one command per lesson, as an instructor would run it);
* ``course grade --jobs 1`` in the sandbox, with ``--unsafe-no-sandbox`` (the sandbox's cost)
  and with ``--unsafe-no-limits`` (the cost of a cgroup per sandbox);
* ``course grade --jobs 1 --execute all`` (every cell run, as nbgrader does: what running
  only the cells the graded ones need saves);
* ``course grade --jobs 2``.

``--limits-only`` runs just ``--jobs 1`` with and without the cgroup limits; ``--speed-only``
leaves out the sandbox's and the limits' costs.

Every command runs in its own process, start-up included. Prints submissions per minute, the
ratios the grading design promises (``--jobs 1`` at least 2x nbgrader; the sandbox costing at
most 10 %) and whether every tool gave every submission the same score. Run it on an
otherwise idle machine: the load average is printed before and after for that reason.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from course_utils.grading.gradebook import Gradebook
from course_utils.grading.report import read_csv
from course_utils.lab import report
from course_utils.paths import check_lessons, course_root, ensure_tools_on_path

DEFAULT_LESSONS = ("00_setup", "01_tensors_devices")
NBGRADER_CONFIG = """\
c = get_config()  # noqa: F821
c.CourseDirectory.root = "."
c.CourseDirectory.db_url = "sqlite:///gradebook.db"
c.ExecutePreprocessor.timeout = 120
"""

Scores = dict[tuple[str, str], float]


def make_submissions(root: Path, folder: Path, per_lesson: int,
                     lessons: tuple[str, ...]) -> int:
    """Alternate solutions and blank releases, per_lesson of each lesson."""
    count = 0
    for lesson in lessons:
        for source in sorted((root / "solutions" / lesson).glob("*.ipynb")):
            for index in range(per_lesson):
                origin = source if index % 2 == 0 else root / "notebooks" / lesson / source.name
                target = folder / f"student{index:03d}" / lesson / source.name
                target.parent.mkdir(parents=True, exist_ok=True)
                nbformat.write(nbformat.read(origin, as_version=4), target)
            count += per_lesson
    return count


def _run(command: list[str], cwd: Path, accepted: tuple[int, ...] = (0,)) -> float:
    """Seconds ``command`` took; stops the benchmark if it fails."""
    started = time.perf_counter()
    done = subprocess.run(command, check=False, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode not in accepted:
        sys.exit(f"{' '.join(command[:5])} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds


def nbgrader_autograde(root: Path, submissions: Path, folder: Path,
                       lessons: tuple[str, ...]) -> tuple[float, Scores]:
    """Time `nbgrader autograde` over every lesson; return (seconds, scores)."""
    course = folder / "nbgrader-course"
    for lesson in lessons:
        shutil.copytree(root / "solutions" / lesson, course / "source" / lesson)
    shutil.copytree(submissions, course / "submitted")
    (course / "nbgrader_config.py").write_text(NBGRADER_CONFIG)
    nbgrader = [sys.executable, "-m", "nbgrader"]
    for lesson in lessons:  # set-up, not timed: registers the lessons in the gradebook
        _run([*nbgrader, "generate_assignment", lesson, "--force"], course)
    seconds = sum(_run([*nbgrader, "autograde", lesson, "--create", "--force"], course)
                  for lesson in lessons)
    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for lesson in lessons:
            for submission in gb.assignment_submissions(lesson):
                scores[(submission.student.id, lesson)] = submission.score
    return seconds, scores


def course_grade(root: Path, submissions: Path, out: Path, *flags: str) -> tuple[float, Scores]:
    command = [sys.executable, "-m", "course_utils", "grade", str(submissions), "--out", str(out),
               "--seed", "0", *flags]
    seconds = _run(command, root, accepted=(0, 1))  # 1: some rows not fully graded
    return seconds, {(row.student, row.lesson): row.score for row in read_csv(out / "grades.csv")}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _grade_all(root: Path, submissions: Path, folder: Path, lessons: tuple[str, ...],
               mode: str) -> dict[str, tuple[float, Scores]]:
    """Each tool's (seconds, scores) on the same submissions; ``mode``: what to leave out
    (limits-only, speed-only, or nothing: '')."""
    runs = {"course grade --jobs 1": course_grade(root, submissions, folder / "j1", "--jobs", "1")}
    if mode != "speed-only":
        runs["course grade --jobs 1 --unsafe-no-limits"] = course_grade(
            root, submissions, folder / "j1l", "--jobs", "1", "--unsafe-no-limits")
    if mode == "limits-only":
        return runs
    runs = {"nbgrader autograde": nbgrader_autograde(root, submissions, folder, lessons), **runs,
            "course grade --jobs 1 --execute all": course_grade(
                root, submissions, folder / "j1a", "--jobs", "1", "--execute", "all")}
    if mode != "speed-only":
        runs["course grade --jobs 1 --unsafe-no-sandbox"] = course_grade(
            root, submissions, folder / "j1u", "--jobs", "1", "--unsafe-no-sandbox")
    runs["course grade --jobs 2"] = course_grade(root, submissions, folder / "j2", "--jobs", "2")
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-lesson", type=int, default=6, help="submissions per lesson")
    parser.add_argument("--lessons", default=",".join(DEFAULT_LESSONS),
                        help="lessons to grade, comma-separated, or 'all' (default: %(default)s)")
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--limits-only", action="store_true",
                        help="only --jobs 1 with and without the cgroup limits")
    choice.add_argument("--speed-only", action="store_true",
                        help="only nbgrader, --jobs 1 (with --execute all too) and --jobs 2")
    args = parser.parse_args()
    root = course_root()
    lessons = tuple(check_lessons(root, None if args.lessons == "all"
                                  else args.lessons.split(",")))
    mode = "limits-only" if args.limits_only else "speed-only" if args.speed_only else ""
    ensure_tools_on_path()  # nbgrader runs this environment's `alembic`
    print(f"{platform.node()}: {report.describe_machine('cpu')}; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as temporary:
        folder = Path(temporary)
        submissions = folder / "submissions"
        total = make_submissions(root, submissions, args.per_lesson, lessons)
        print(f"{total} submissions of {', '.join(lessons)} (half solved, half blank)\n")
        runs = _grade_all(root, submissions, folder, lessons, mode)
    rate = {name: total / seconds * 60 for name, (seconds, _) in runs.items()}
    width = max(map(len, runs))
    for name, (seconds, _) in runs.items():
        print(f"{name:<{width}}  {seconds:6.1f} s  {rate[name]:5.1f} submissions/minute")
    one = rate["course grade --jobs 1"]
    print()
    if not args.speed_only:
        limits_cost = 1 - one / rate["course grade --jobs 1 --unsafe-no-limits"]
        print(f"cgroup limits' cost at --jobs 1: {limits_cost:+.1%} (goal: under 10 %)")
    if args.limits_only:
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        return
    nbgrader = rate["nbgrader autograde"]
    print(f"--jobs 1 / nbgrader autograde: {one / nbgrader:.2f}x (goal: at least 3x on "
          "lessons 00-01)")
    print(f"--jobs 2 / nbgrader autograde: {rate['course grade --jobs 2'] / nbgrader:.2f}x "
          "(goal: at least 4x on the whole course)")
    print(f"--jobs 1, only the cells needed / every cell: "
          f"{one / rate['course grade --jobs 1 --execute all']:.2f}x")
    if not args.speed_only:
        sandbox_cost = 1 - one / rate["course grade --jobs 1 --unsafe-no-sandbox"]
        print(f"sandbox cost at --jobs 1: {sandbox_cost:+.1%} (goal: at most 10 %)")
    print(f"--jobs 2 / --jobs 1: {rate['course grade --jobs 2'] / one:.2f}x")
    reference = runs["nbgrader autograde"][1]
    same = all(scores == reference for _, scores in runs.values())
    print(f"same score for every submission from all of them: {same}")
    if not same:
        for name, (_, scores) in runs.items():
            differing = {key: (scores.get(key), reference.get(key))
                         for key in sorted(set(reference) | set(scores))
                         if scores.get(key) != reference.get(key)}
            if differing:
                print(f"  {name} vs nbgrader: {differing}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
