"""Hand grading a class graded in shards: formgrader on the PostgreSQL gradebook, in Chromium.

docs/cluster.md's steps 3–5 as an instructor follows them in a copy of the course: two shards
of three students into one PostgreSQL gradebook (default --out grading-output), `course
collect`, `make instructor` with COURSE_GRADEBOOK_URL naming the gradebook, a hand score and
comment for a written answer typed into formgrader, `course collect` again. `make
test-cluster` runs it (with tests/test_cluster.py); `make test` skips it.
"""
from __future__ import annotations

import csv
import os
import subprocess
from pathlib import Path

import pytest

from .test_browser import (
    CHROMIUM,
    CHROMIUM_FLAGS,
    HAND_COMMENT,
    HAND_SCORE,
    LESSON,
    NOTEBOOK,
    WRITTEN,
    Lab,
    Steps,
    _browser_or_skip,
    copy_course,
    save_field,
    write_submissions,
)
from .test_cluster import RUN_IT
from .test_gradebook_postgres import _create_database, postgres  # noqa: F401 (a fixture)

pytestmark = [
    pytest.mark.slow, pytest.mark.browser,
    pytest.mark.skipif(os.environ.get(RUN_IT) != "1",
                       reason="part of `make test-cluster` (PostgreSQL and a browser)"),
]


def _course(course: Path, *args: str) -> str:
    done = subprocess.run([str(course / ".venv" / "bin" / "course"), *args], cwd=course,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_formgrader_hand_grades_a_sharded_class_on_postgresql(postgres, tmp_path,  # noqa: F811
                                                              monkeypatch):
    """Checks formgrader lists every student of both shards from the PostgreSQL gradebook,
    opens a student's autograded notebook gathered by `course collect`, saves a hand score
    and comment, and `course collect` then puts them in grades.csv and the feedback."""
    from course_utils.grading import sandbox

    sync_playwright = _browser_or_skip()
    course = copy_course(tmp_path / "course")
    steps = Steps(tmp_path / "screenshots")
    write_submissions(course)
    db_url = _create_database(postgres, "formgrader")
    monkeypatch.setenv("COURSE_GRADEBOOK_URL", db_url)  # course's --db, and formgrader's
    unsafe = [] if sandbox.detect().sandboxed else ["--unsafe-no-sandbox"]
    for index in range(2):
        _course(course, "grade", "submissions", "--lesson", LESSON, "--roster", "students.csv",
                "--seed", "7", "--shard", f"{index}/2", *unsafe)
    assert "Complete: 2 shard(s)" in _course(course, "collect", "--roster", "students.csv")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_FLAGS, viewport={"width": 1280, "height": 860})
        lab = Lab(course, "instructor", tmp_path / "instructor.log")
        page = context.new_page()
        try:
            page.goto(lab.url("/formgrader"))  # signs in: formgrader's API calls need it
            page.wait_for_function(
                "() => [...document.querySelectorAll('.num-submissions')]"
                ".some(e => e.textContent.trim() === '3')", timeout=60_000)
            page.goto(lab.url(f"/formgrader/manage_submissions/{LESSON}"))
            page.wait_for_function(
                "() => document.querySelectorAll('.student-name').length === 3",
                timeout=60_000)
            steps.shot(page, "sharded-class-in-formgrader")
            page.goto(lab.url(f"/formgrader/gradebook/{LESSON}/{Path(NOTEBOOK).stem}"))
            alice = page.locator("a.name-shown", has_text="Archer, Alice")
            alice.wait_for(state="attached", timeout=30_000)
            page.goto(lab.url(alice.get_attribute("href")))
            score = page.locator(f"input.score#{WRITTEN}")
            score.wait_for(timeout=30_000)  # the autograded copy collect gathered
            page.wait_for_load_state("networkidle")
            save_field(page, score, HAND_SCORE, "/formgrader/api/grade/")
            save_field(page, page.locator(f"textarea#{WRITTEN}-comment"), HAND_COMMENT,
                       "/formgrader/api/comment/")
            steps.shot(page, "hand-grade-on-postgresql")
        except BaseException:
            steps.shot(page, "failure")
            raise
        finally:
            lab.stop()
            context.close()
    _course(course, "collect")
    with (course / "grading-output" / "grades.csv").open(newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert sorted(rows) == ["alice", "bob", "carol"]
    assert rows["alice"][WRITTEN] == HAND_SCORE and rows["alice"]["name"] == "Archer, Alice"
    assert float(rows["alice"]["score"]) == 4 + float(HAND_SCORE)
    page_text = (course / "grading-output" / "feedback" / "alice" / f"{LESSON}.html").read_text()
    assert HAND_COMMENT in page_text
