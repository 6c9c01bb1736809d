"""`course release-feedback`: only finished submissions go out through nbgrader's exchange,
the rest are listed with why (the students' side, fetch_feedback, is in test_exchange.py)."""
from __future__ import annotations

from datetime import datetime

from nbgrader.utils import notebook_hash

from course_utils.grading import feedback, gradebook
from course_utils.grading.changes import record_changes
from course_utils.grading.records import ItemResult, NotebookResult, Status, SubmissionResult
from course_utils.grading.structure import load_lesson
from course_utils.tools.handback import FeedbackRelease, release_feedback

from .conftest import ROOT

LESSON = "00_setup"


def result(student: str) -> SubmissionResult:
    items = (ItemResult("test_pick_device", 2, 2.0, "passed"),
             ItemResult("test_gpu_inventory", 2, 2.0, "passed"),
             ItemResult("hardcoded_cuda", 2, None, "needs manual grading"))
    return SubmissionResult(student, LESSON, (NotebookResult("setup", Status.GRADED, "", items),))


def hand_grade(db_url: str, student: str, score: float) -> None:
    with gradebook.Gradebook(db_url) as gb:
        grade = gb.find_grade("hardcoded_cuda", "setup", LESSON, student)
        grade.manual_score, grade.needs_manual_grade = score, False
        gb.db.commit()


def test_only_finished_submissions_are_released(tmp_path, monkeypatch):
    """alice is hand-graded and re-graded: released. carol was hand-graded after the last run,
    dave not at all, bob came from an LMS download (no secret): each held, with why."""
    exchange = tmp_path / "exchange"
    monkeypatch.setenv("COURSE_EXCHANGE", str(exchange))
    out = tmp_path / "out"
    db_url = f"sqlite:///{out / 'gradebook.db'}"
    out.mkdir()
    lessons = {LESSON: load_lesson(ROOT, LESSON)}
    gradebook.register_lessons(db_url, list(lessons.values()))
    students = ("alice", "bob", "carol", "dave")
    for student in students:
        folder = out / "submitted" / student / LESSON
        folder.mkdir(parents=True)
        (folder / "setup.ipynb").write_text("{}")
        (folder / "timestamp.txt").write_text("2026-03-01 10:00:00.000000 UTC")
        if student != "bob":
            (folder / "submission_secret.txt").write_text(f"secret-{student}")
    when = datetime(2026, 3, 1, 10)
    with gradebook.GradebookWriter(db_url) as writer:
        recorded = {student: writer.record(result(student), when) for student in students}
        for student in ("alice", "bob"):
            hand_grade(db_url, student, 2.0)
            recorded[student] = writer.record(result(student), when)  # the re-grade
    for graded in recorded.values():
        feedback.write(out / "feedback", graded)
    record_changes(out, ROOT, lessons, list(recorded.values()), 7)
    hand_grade(db_url, "carol", 1.0)  # after the last run

    done = release_feedback(FeedbackRelease(ROOT, (LESSON,), out=out))
    assert done.released == [("alice", LESSON)]
    held = {student: why for student, _, why in done.held}
    assert held["dave"] == "not hand-graded yet: hardcoded_cuda"
    assert held["carol"].startswith("hand-graded after the last `course grade` (hardcoded_cuda)")
    assert held["bob"].startswith("not submitted through the exchange")
    released = exchange / "gpu-course" / "feedback" / \
        f"{notebook_hash(secret='secret-alice', notebook_id='setup')}.html"
    assert "Score: 6 / 6</strong>" in released.read_text()
    assert len(list(released.parent.iterdir())) == 1
