"""Feedback pages: honest totals, escaped messages."""
from __future__ import annotations

from course_utils.grading.feedback import render
from course_utils.grading.records import ItemResult, NotebookResult, Status, SubmissionResult


def result(*items, status=Status.GRADED, reason=""):
    return SubmissionResult("ada", "00_setup",
                            (NotebookResult("setup", status, reason, tuple(items)),))


def test_totals_separate_autograded_from_written_points():
    """Checks the headline counts only autograded points, and says written ones come later."""
    page = render(result(ItemResult("t1", 2, 2.0, "passed", "d1"),
                         ItemResult("t2", 3, 0.0, "wrong", "d2"),
                         ItemResult("w", 2, None, "needs manual grading")))
    assert "Autograded score: 2 / 5</strong> — written answers (2 points) are graded by hand" in page
    assert "to be graded by hand" in page


def test_messages_and_names_are_escaped():
    """Checks a message cannot inject HTML into the page."""
    page = render(result(ItemResult("t<1>", 1, 0.0, "<script>alert(1)</script>", "a & b")))
    assert "<script>" not in page
    assert "&lt;script&gt;" in page and "a &amp; b" in page and "t&lt;1&gt;" in page


def test_the_status_and_reason_are_shown():
    """Checks a notebook that was not fully graded says why, and a renamed one which file."""
    page = render(result(ItemResult("t1", 2, 2.0, "passed"), status=Status.KERNEL_DIED,
                         reason="the kernel died (in cell 4)"))
    assert "Status: kernel-died — the kernel died (in cell 4)" in page
    renamed = render(result(ItemResult("t1", 2, 2.0, "passed"),
                            reason="graded 'setup (1).ipynb': no file named setup.ipynb"))
    assert "Status: graded — graded &#x27;setup (1).ipynb&#x27;" in renamed
