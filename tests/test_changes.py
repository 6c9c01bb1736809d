"""Re-grades that say what changed: grades-changes.csv, old and new score, and why."""
from __future__ import annotations

import dataclasses

from course_utils.grading.changes import read_changes, record_changes
from course_utils.grading.records import (
    ItemResult,
    Lateness,
    NotebookResult,
    Status,
    SubmissionResult,
)
from course_utils.grading.structure import load_lesson

from .conftest import ROOT


def result(student: str, pick: float, written: float | None = None,
           late: Lateness | None = None) -> SubmissionResult:
    items = (ItemResult("test_pick_device", 2, pick, ""),
             ItemResult("hardcoded_cuda", 2, None, "", hand_score=written))
    return SubmissionResult(student, "00_setup",
                            (NotebookResult("setup", Status.GRADED, "", items),), late)


def hand_in(out, student: str, text: str) -> None:
    folder = out / "submitted" / student / "00_setup"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "setup.ipynb").write_text(text)


def test_each_changed_score_is_listed_with_its_causes(tmp_path):
    """Checks a first run lists each submission as first graded, and a re-grade names a new
    submission (by checksum), a hand grade, a penalty, a new seed, and nothing unchanged."""
    lessons = {"00_setup": load_lesson(ROOT, "00_setup")}
    for student in ("alice", "bob", "carol", "dave"):
        hand_in(tmp_path, student, "{}")
    first = record_changes(tmp_path, ROOT, lessons, [result("alice", 0), result("bob", 2),
                                                     result("carol", 2), result("dave", 2)], 7)
    assert [(c.student, c.column, c.old, c.new, c.why) for c in first.changes][:2] == [
        ("alice", "score", None, 0, "first graded"), ("bob", "score", None, 2, "first graded")]
    assert first.first == 4 and first.compared == 0

    hand_in(tmp_path, "alice", '{"cells": []}')  # alice handed in again
    again = record_changes(tmp_path, ROOT, lessons, [
        result("alice", 2),                                   # new submission
        result("bob", 2, written=1.5),                        # hand grade
        result("carol", 2, late=Lateness(3600, 0.2)),         # penalty
        result("dave", 2)], 7)                                # nothing changed
    changes = read_changes(again.path)
    assert changes == again.changes
    by = {(c.student, c.column): c for c in changes}
    assert set(by) == {("alice", "test_pick_device"), ("alice", "score"),
                       ("bob", "hardcoded_cuda"), ("bob", "score"),
                       ("carol", "penalty"), ("carol", "score")}
    assert (by["alice", "score"].old, by["alice", "score"].new) == (0, 2)
    assert by["alice", "test_pick_device"].why.startswith("new submission (sha256 ")
    assert by["bob", "hardcoded_cuda"].why == "hand grade (none → 1.5)"
    assert (by["bob", "hardcoded_cuda"].old, by["bob", "hardcoded_cuda"].new) == (None, 1.5)
    assert by["carol", "penalty"].why.startswith("late penalty")
    assert (by["carol", "score"].old, by["carol", "score"].new) == (2, 1.8)
    assert again.line.startswith("Changes since the last run: 3 of 4 lesson score(s) changed, "
                                 "for 3 student(s)")

    reseeded = record_changes(tmp_path, ROOT, lessons, [result("dave", 0)], 8)
    (score_change,) = [c for c in reseeded.changes if c.column == "score"]
    assert score_change.why == "hidden inputs drawn anew (seed 7 → 8)"
    # Submissions this run did not grade keep their basis: alice is compared next time too.
    assert record_changes(tmp_path, ROOT, lessons, [result("alice", 2)], 8).changes == []


def test_a_changed_check_is_named(tmp_path):
    lessons = {"00_setup": load_lesson(ROOT, "00_setup")}
    hand_in(tmp_path, "alice", "{}")
    record_changes(tmp_path, ROOT, lessons, [result("alice", 2)], 7)
    notebook = lessons["00_setup"].notebooks[0]
    item = dataclasses.replace(notebook.items[0], points=3)  # the instructor re-weighted it
    changed = {"00_setup": dataclasses.replace(lessons["00_setup"], notebooks=(
        dataclasses.replace(notebook, items=(item, *notebook.items[1:])),))}
    summary = record_changes(tmp_path, ROOT, changed, [result("alice", 3)], 7)
    assert summary.changes[0].why.startswith("checks changed (")
