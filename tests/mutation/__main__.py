"""python -m tests.mutation [--exercise lessonNN/<id> ...] [--slow] [--seeds 1,7,42] [--write]

Runs the mutation analysis (docs/mutation.md says what it measures) and prints each
exercise's figures; --write records them in tests/mutation/baseline.json and rewrites
docs/mutation.md. --through-grade N instead grades a sample of N answers per exercise through
`course grade` and compares its verdicts with in-process ones (tests/mutation/graded.py).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from .analysis import analyse
from .exercises import exercise, exercises
from .run import settings
from .variants import variants


def _arguments(argv):
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__)
    parser.add_argument("--exercise", action="append", help="lessonNN/<id>; default: all")
    parser.add_argument("--slow", action="store_true", help="also the exercises marked slow")
    parser.add_argument("--seeds", help="hidden seeds, comma-separated (default: per exercise)")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when a figure falls below tests/mutation/baseline.json")
    parser.add_argument("--write", action="store_true",
                        help="update the baseline and docs/mutation.md (after --check passes)")
    parser.add_argument("--json", help="write the records to this file")
    parser.add_argument("--alternatives", action="store_true",
                        help="run the right alternatives only (no variants)")
    parser.add_argument("--kind", choices=["generic", "learner"],
                        help="run one class of variants only (a lighter run)")
    parser.add_argument("--verbose", action="store_true", help="print every variant's verdict")
    parser.add_argument("--through-grade", type=int, metavar="N",
                        help="grade N answers per exercise (N-1 killed variants, one right) "
                             "through `course grade` and compare with in-process (default "
                             "exercises: tests/mutation/graded.py's SAMPLE)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = _arguments(argv)
    import course_utils.checks  # noqa: F401 - loaded once, before the children fork

    if args.through_grade is not None:
        from .graded import main as through_grade

        return through_grade(args.through_grade, args.exercise)
    chosen = [exercise(key) for key in args.exercise] if args.exercise else [
        e for e in exercises() if args.slow or not settings(e).slow]
    seeds = tuple(int(s) for s in args.seeds.split(",") if s) if args.seeds is not None \
        else None
    started, records = time.perf_counter(), []

    def progress(found, row):
        if args.verbose:
            print(f"  {row['verdict']:10} {row['id']} {row['detail']}", flush=True)

    for found in chosen:
        only = [] if args.alternatives else [v for v in variants(found) if v.kind == args.kind] \
            if args.kind else None
        record = analyse(found, seeds, only=only, progress=progress,
                         note=f"{args.kind} variants only" if args.kind else "")
        for lost in record["alternatives_lost"]:
            print(f"  right alternative {lost['alternative']} lost points: {lost['message']}")
        records.append(record)
        g, learner = record["generic"], record["learner"]
        right = record["alternatives"] - len(record["alternatives_lost"])
        print(f"{found.key}: generic {g['variants']} (killed {g['killed']:.0%}, named "
              f"{g['named_share']:.0%}), learner {learner['variants']} (killed "
              f"{learner['killed']:.0%}, named {learner['named_share']:.0%}), survivors "
              f"{len(record['survivors'])}, right {right}/{record['alternatives']}, "
              f"{record['seconds']:.0f} s", flush=True)
    elapsed = time.perf_counter() - started
    print(f"{len(records)} exercise(s) in {elapsed:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1, ensure_ascii=False))
    from .report import load_baseline, regressions, save

    worse = [line for record in records for line in regressions(record, load_baseline())]
    for line in worse:
        print(f"WORSE: {line}")
    if args.check and worse:
        return 1
    if args.write:
        slow = " (those marked slow included)" if args.slow and not args.exercise else ""
        machine = f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end"
        save(records, f"{len(records)} exercise(s){slow} run in {elapsed:.0f} s (wall clock) on "
                      f"{time.strftime('%Y-%m-%d')} ({machine}), hidden seeds "
                      f"{seeds if seeds is not None else 'per exercise (default 1, 7, 42)'}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
