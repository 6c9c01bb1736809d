"""Late work: the policy and extension files, the penalty rule, and the penalty kept where
nbgrader keeps it, recomputed (never stacked) on every re-grade."""
from __future__ import annotations

import dataclasses
from datetime import datetime

import pytest

from course_utils.grading import gradebook
from course_utils.grading.feedback import render
from course_utils.grading.late import PenaltyRule, read_extensions, read_policy
from course_utils.grading.records import ItemResult, NotebookResult, Status, SubmissionResult
from course_utils.grading.report import Row, read_csv, write_csv
from course_utils.grading.structure import load_lesson

from .conftest import ROOT

POLICY = """
[penalty]
method = "per-day"
percent_per_day = 10
cap_percent = 25
grace_minutes = 15

[due]
"00_setup" = 2026-03-02T23:00:00+01:00
"""


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("late")
    (folder / "late.toml").write_text(POLICY)
    (folder / "extensions.csv").write_text("student,lesson,days\nbob,00_setup,2\nbob,*,1\n"
                                           "carol,*,0.5\n")
    return read_policy(folder / "late.toml"), read_extensions(folder / "extensions.csv")


def test_files_are_read_into_naive_utc_and_days(policy):
    """Checks the due date is stored as nbgrader stores it (naive UTC) and a lesson's own
    extension wins over a '*' line."""
    late, extensions = policy
    assert late.due_date("00_setup") == datetime(2026, 3, 2, 22, 0)
    assert late.rule == PenaltyRule("per-day", 10, 25, 15)
    assert extensions.granted("bob", "00_setup") == 2
    assert extensions.granted("bob", "01_first_gpu_run") == 1
    assert extensions.granted("alice", "00_setup") == 0


@pytest.mark.parametrize("seconds, penalty", [
    (0, 0), (14 * 60, 0),             # on time; within the grace
    (16 * 60, 0.6), (86400, 0.6),     # a day begun counts as a day: 10 % of 6
    (86401, 1.2), (10 * 86400, 1.5),  # two days; capped at 25 %
])
def test_per_day_penalty_with_grace_and_cap(seconds, penalty):
    assert PenaltyRule("per-day", 10, 25, 15).penalty(6, seconds) == pytest.approx(penalty)


def test_zero_takes_the_whole_score_and_none_nothing():
    assert PenaltyRule("zero").penalty(4.5, 1) == 4.5
    assert PenaltyRule("none").penalty(4.5, 10**6) == 0


@pytest.mark.parametrize("text, message", [
    ('[penalty]\nmethod = "half"', "method must be one of none, per-day, zero, got 'half'"),
    ("[penalty]\ncap_percent = 150", "cap_percent must be at most 100"),
    ("[penalty]\npercent = 10", "unknown \\[penalty\\] key\\(s\\) percent"),
    ('[due]\n"00_setup" = "next week"', "\\[due\\] '00_setup' must be a date and time"),
    ("[dues]", "unknown table\\(s\\) dues"),
])
def test_bad_policies_are_named(tmp_path, text, message):
    (tmp_path / "late.toml").write_text(text)
    with pytest.raises(ValueError, match=message):
        read_policy(tmp_path / "late.toml")


def test_a_due_date_for_an_unknown_lesson_is_refused(tmp_path):
    (tmp_path / "late.toml").write_text('[due]\n"99_nothing" = 2026-01-01T00:00:00Z')
    with pytest.raises(ValueError, match="'99_nothing', not a lesson of this course"):
        read_policy(tmp_path / "late.toml").check_lessons(["00_setup"])


def test_bad_extensions_are_named(tmp_path):
    (tmp_path / "ext.csv").write_text("student,lesson,days\nbob,00_setup,-1\n")
    with pytest.raises(ValueError, match="line 2: needs a student, a lesson"):
        read_extensions(tmp_path / "ext.csv")


def submission(student: str) -> SubmissionResult:
    items = (ItemResult("test_pick_device", 2, 2.0, "passed"),
             ItemResult("test_gpu_inventory", 2, 2.0, "passed"),
             ItemResult("hardcoded_cuda", 2, None, "needs manual grading"))
    return SubmissionResult(student, "00_setup",
                            (NotebookResult("setup", Status.GRADED, "", items),))


def test_the_penalty_is_kept_in_nbgraders_gradebook_and_never_stacked(tmp_path, policy):
    """Checks a late submission's due date, extension and penalty are where formgrader and
    nbgrader read them, and that re-grading (also after a hand score) recomputes the penalty
    from the score instead of taking it again."""
    late, extensions = policy
    db_url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    gradebook.register_lessons(db_url, [load_lesson(ROOT, "00_setup")])
    handed_in = datetime(2026, 3, 4, 23, 0)  # 2 days 1 hour late; bob has 2 + 0 days more
    with gradebook.GradebookWriter(db_url, late, extensions) as writer:
        alice = writer.record(submission("alice"), handed_in)
        bob = writer.record(submission("bob"), handed_in)
        again = writer.record(submission("alice"), handed_in)
    assert alice.late.seconds_late == 2 * 86400 + 3600
    assert alice.penalty == again.penalty == pytest.approx(4 * 0.25)  # capped at 25 % of 4
    assert again.score == 3 and "submitted 2.04 days late: -1 points" in again.reason
    assert bob.late.seconds_late == 3600 and bob.late.extension_days == 2
    assert bob.penalty == pytest.approx(0.4)
    with gradebook.Gradebook(db_url) as gb:
        assert gb.find_assignment("00_setup").duedate == datetime(2026, 3, 2, 22, 0)
        stored = gb.find_submission("00_setup", "bob")
        assert stored.extension.days == 2 and stored.total_seconds_late == 3600
        notebook = gb.find_submission_notebook("setup", "00_setup", "alice")
        assert notebook.late_submission_penalty == pytest.approx(1.0)
        gb.find_grade("hardcoded_cuda", "setup", "00_setup", "alice").manual_score = 2.0
        gb.db.commit()
    with gradebook.GradebookWriter(db_url, late, extensions) as writer:
        regraded = writer.record(submission("alice"), handed_in)
    assert regraded.penalty == pytest.approx(1.5) and regraded.score == 4.5  # 25 % of 6
    with gradebook.GradebookWriter(db_url) as writer:  # the policy dropped: no penalty left
        assert writer.record(submission("alice"), handed_in).late is None
    with gradebook.Gradebook(db_url) as gb:
        assert not gb.find_submission_notebook("setup", "00_setup", "alice") \
            .late_submission_penalty


def test_grades_csv_and_feedback_show_the_penalty(tmp_path):
    from course_utils.grading.records import Lateness

    result = dataclasses.replace(submission("alice"), late=Lateness(1.5 * 86400, 0.8))
    write_csv(tmp_path / "grades.csv", [Row.from_result(result, 7)])
    (row,) = read_csv(tmp_path / "grades.csv")
    assert (row.score, row.penalty) == (3.2, 0.8)
    assert "submitted 1.50 days late: -0.8 points" in row.reason
    page = render(result)
    assert "Score: 3.2 / 6</strong>" in page and "Late: submitted 1.50 days late" in page


def test_the_plugin_is_nbgraders_late_submission_interface():
    """Checks `nbgrader autograde` can use the course's rule (AssignLatePenalties.plugin_class)."""
    from nbgrader.plugins import LateSubmissionPlugin

    from course_utils.grading.late_plugin import CoursePenalty

    plugin = CoursePenalty(penalty_method="per-day", percent_per_day=10, cap_percent=50)
    assert isinstance(plugin, LateSubmissionPlugin)
    assert plugin.late_submission_penalty("ada", 8, 3 * 86400) == pytest.approx(2.4)


def test_formgrader_shows_the_lateness_atop_the_autograded_notebook(tmp_path):
    """Checks the note is the first cell of the copy formgrader shows, and is never doubled."""
    import nbformat

    from course_utils.grading.late_plugin import show_in_formgrader
    from course_utils.grading.records import Lateness

    path = tmp_path / "alice" / "00_setup" / "setup.ipynb"
    path.parent.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), path)
    late = dataclasses.replace(submission("alice"), late=Lateness(86400, 0.4, 1))
    show_in_formgrader(tmp_path, late)
    show_in_formgrader(tmp_path, late)
    cells = nbformat.read(path, as_version=4).cells
    assert [cell.cell_type for cell in cells] == ["markdown", "code"]
    assert cells[0].source.startswith("**Late:** submitted 1.00 days late (after a 1-day "
                                      "extension): -0.4 points")
