"""nbgrader's side of late work: the course's penalty as an nbgrader ``LateSubmissionPlugin``,
and the due date, extension and penalty written where nbgrader keeps them.

The plugin is nbgrader's own interface, so ``nbgrader autograde`` can use the same rule::

    c.AssignLatePenalties.plugin_class = "course_utils.grading.late_plugin.CoursePenalty"
    c.CoursePenalty.penalty_method = "per-day"
    c.CoursePenalty.percent_per_day = 10
"""
from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Enum, Float

from .late import METHODS, Extensions, LatePolicy, PenaltyRule, seconds_late
from .records import Lateness, SubmissionResult

if TYPE_CHECKING:
    from nbgrader.api import Gradebook


class CoursePenalty(LateSubmissionPlugin):
    """The course's penalty rule (late.PenaltyRule) behind nbgrader's plugin interface."""

    penalty_method = Enum(METHODS, default_value="none",
                          help="none; per-day (percent of the score per day begun, capped); "
                               "zero (the whole score)").tag(config=True)
    percent_per_day = Float(0.0, help="percent of the score per day begun").tag(config=True)
    cap_percent = Float(100.0, help="the most a penalty takes, in percent").tag(config=True)
    grace_minutes = Float(0.0, help="late by less than this: no penalty").tag(config=True)

    @classmethod
    def from_rule(cls, rule: PenaltyRule) -> CoursePenalty:
        return cls(penalty_method=rule.method, percent_per_day=rule.percent_per_day,
                   cap_percent=rule.cap_percent, grace_minutes=rule.grace_minutes)

    @property
    def rule(self) -> PenaltyRule:
        return PenaltyRule(self.penalty_method, self.percent_per_day, self.cap_percent,
                           self.grace_minutes)

    def late_submission_penalty(self, student_id: str, score: float,
                                total_seconds_late: float) -> float | None:
        return self.rule.penalty(score, total_seconds_late)


def apply_late_policy(gb: Gradebook, result: SubmissionResult, timestamp: datetime | None,
                      policy: LatePolicy, extensions: Extensions) -> SubmissionResult:
    """Set the lesson's due date, the student's extension and each notebook's penalty in the
    gradebook, from the scores in ``result`` (hand grades included); return the result with
    its :class:`Lateness`. Every penalty is reset first, as nbgrader's AssignLatePenalties does:
    re-grading recomputes it, never takes it twice."""
    due = policy.due_date(result.lesson)
    gb.find_assignment(result.lesson).duedate = due
    granted = extensions.granted(result.student, result.lesson)
    submission = gb.find_submission(result.lesson, result.student)
    submission.extension = timedelta(days=granted) if granted else None
    late_by = seconds_late(timestamp or submission.timestamp, due, granted)
    plugin = CoursePenalty.from_rule(policy.rule)
    total = 0.0
    for notebook in result.notebooks:
        row = gb.find_submission_notebook(notebook.name, result.lesson, result.student)
        row.late_submission_penalty = None
        if late_by > 0:
            score = sum(item.awarded or 0.0 for item in notebook.items)
            penalty = plugin.late_submission_penalty(result.student, score, late_by) or 0.0
            row.late_submission_penalty = penalty or None
            total += penalty
    late = Lateness(late_by, total, granted) if late_by > 0 else None
    return dataclasses.replace(result, late=late)


LATE_NOTE = "course-late-note"  # the tag of the note cell, so that a note is never added twice


def show_in_formgrader(autograded: Path, result: SubmissionResult) -> None:
    """Put the lateness at the top of each autograded notebook of a late submission: the page
    formgrader shows when grading it by hand (its lists show scores before any penalty)."""
    import nbformat

    if result.late is None:
        return  # the workers wrote these copies afresh: no note from an earlier run is left
    text = (f"**Late:** {result.late.describe()} (the course's late policy; "
            f"`grades.csv` and the feedback count it).")
    for notebook in result.notebooks:
        path = autograded / result.student / result.lesson / f"{notebook.name}.ipynb"
        if not path.is_file():
            continue  # nothing was graded (missing, unreadable)
        nb = nbformat.read(path, as_version=4)
        nb.cells = [cell for cell in nb.cells
                    if LATE_NOTE not in cell.get("metadata", {}).get("tags", [])]
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(text, metadata={"tags": [LATE_NOTE]}))
        nbformat.write(nb, path)
