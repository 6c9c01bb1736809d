"""Feedback pages: honest totals, escaped messages."""
from __future__ import annotations

from course_utils.grading.feedback import render
from course_utils.grading.records import ItemResult, NotebookResult, Status, SubmissionResult


def result(*items, status=Status.GRADED, reason=""):
    return SubmissionResult("ada", "00_setup",
                            (NotebookResult("setup", status, reason, tuple(items)),))


def test_totals_say_which_written_points_are_still_to_be_graded():
    """Checks the headline counts the points given so far, and says written ones come later."""
    page = render(result(ItemResult("t1", 2, 2.0, "passed", "d1"),
                         ItemResult("t2", 3, 0.0, "wrong", "d2"),
                         ItemResult("w", 2, None, "needs manual grading")))
    assert "Score: 2 / 7</strong> — written answers (2 points) are still to be graded by hand" \
        in page
    assert "to be graded by hand" in page


def test_hand_scores_and_comments_are_shown_and_counted():
    """Checks a score and comment given in formgrader appear, and count in the total."""
    page = render(result(ItemResult("t1", 2, 2.0, "passed", "d1"),
                         ItemResult("w", 2, None, "needs manual grading", hand_score=1.5,
                                    hand_comment="Good, but <why> the sync?")))
    assert "Score: 3.5 / 4</strong></p>" in page
    assert "1.5 / 2 (graded by hand)" in page
    assert "Good, but &lt;why&gt; the sync?" in page
    assert "needs manual grading" not in page and "still to be graded" not in page


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
