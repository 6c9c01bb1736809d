"""``course export`` and ``course release-feedback``: what comes after `course grade`.

Their options come from the records that carry them (grading.options): ExportRequest's and
FeedbackRelease's fields, each declared once.
"""
from __future__ import annotations

import argparse
import sys

from ..grading.options import add_options, chosen


def _export(args: argparse.Namespace) -> int:
    from ..grading.export import ExportRequest, export
    from ..paths import course_root

    done = export(ExportRequest(course_root(), **chosen(args, ExportRequest)))
    print(f"Wrote {done.path}: {done.students} student(s).")
    if done.unmatched:
        print(f"Not in the template (no row whose SIS User ID or SIS Login ID is their id or "
              f"roster email), so not exported: {', '.join(done.unmatched)}", file=sys.stderr)
    if done.waiting:
        print(f"Written answers still to grade by hand (their points are not in the export "
              f"yet): {', '.join(done.waiting)}", file=sys.stderr)
    return 0


def _release_feedback(args: argparse.Namespace) -> int:
    from ..paths import course_root
    from .handback import FeedbackRelease, release_feedback

    done = release_feedback(FeedbackRelease(course_root(), tuple(args.lessons),
                                            **chosen(args, FeedbackRelease)))
    print(f"Released through {done.exchange}: {len(done.released)} submission(s)"
          + "".join(f"\n  {student} {lesson}" for student, lesson in done.released))
    if done.held:
        print(f"Held back: {len(done.held)} submission(s)"
              + "".join(f"\n  {student} {lesson}: {why}" for student, lesson, why in done.held))
    return 0


def add_commands(commands) -> None:
    """`course export` and `course release-feedback`, beside `course grade`."""
    from ..grading.export import ExportRequest
    from .handback import FeedbackRelease

    export = commands.add_parser(
        "export", help="grades.csv as your learning platform imports it (Canvas, or a plain "
                       "CSV keyed by the roster's ids)")
    add_options(export, ExportRequest)
    export.set_defaults(run=_export)

    handback = commands.add_parser(
        "release-feedback", help="release feedback through nbgrader's exchange, for the "
                                 "submissions whose hand grading is finished")
    handback.add_argument("lessons", nargs="*", metavar="LESSON", help="default: every lesson")
    add_options(handback, FeedbackRelease)
    handback.set_defaults(run=_release_feedback)
