"""Feedback pages: honest totals, escaped messages."""
from __future__ import annotations

from course_utils.grading.feedback import render


def result(items):
    return {"student": "ada", "lesson": "00_setup",
            "notebooks": [{"name": "setup", "status": "graded", "reason": "", "items": items}]}


def test_totals_separate_autograded_from_written_points():
    """Checks the headline counts only autograded points, and says written ones come later."""
    page = render(result([
        {"grade_id": "t1", "points": 2, "score": 2.0, "message": "passed", "docstring": "d1"},
        {"grade_id": "t2", "points": 3, "score": 0.0, "message": "wrong", "docstring": "d2"},
        {"grade_id": "w", "points": 2, "score": None, "message": "needs manual grading",
         "docstring": ""}]))
    assert "Autograded score: 2 / 5</strong> — written answers (2 points) are graded by hand" in page
    assert "to be graded by hand" in page


def test_messages_and_names_are_escaped():
    """Checks a message cannot inject HTML into the page."""
    page = render(result([{"grade_id": "t<1>", "points": 1, "score": 0.0,
                           "message": "<script>alert(1)</script>", "docstring": "a & b"}]))
    assert "<script>" not in page
    assert "&lt;script&gt;" in page and "a &amp; b" in page and "t&lt;1&gt;" in page
