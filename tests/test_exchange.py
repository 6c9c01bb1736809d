"""nbgrader's exchange for one course on a shared machine, end to end, with two students.

The instructor releases lesson 00 into the course's own exchange folder; two students, each
with their own HOME and user name, fetch it, work and submit; the instructor collects the
submissions into grading-output/submitted/ and grades exactly that with `course grade`.
Real nbgrader commands throughout, in a temporary copy of the course.

nbgrader names a student by the OS user of the process (``pwd.getpwuid(os.getuid())``), as
on a JupyterHub where each user has an account. Each student's commands therefore run in
their own user namespace (bubblewrap, which grading needs anyway) with a passwd file that
gives that uid the student's name; nothing on the machine is changed.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import nbformat
import pytest

from .conftest import ROOT
from .test_browser import copy_course

pytestmark = pytest.mark.slow

LESSON, NOTEBOOK = "00_setup", "setup.ipynb"
BIN = ROOT / ".venv" / "bin"


def run(command: list[str], cwd: Path, env: dict | None = None,
        user: str | None = None) -> str:
    if user is not None:  # as that user: own uid in a user namespace, named in a passwd file
        passwd = cwd / "passwd"
        passwd.write_text(f"root:x:0:0:root:/root:/bin/sh\n{user}:x:1000:1000::{cwd}:/bin/sh\n")
        command = ["bwrap", "--dev-bind", "/", "/", "--unshare-user", "--uid", "1000",
                   "--gid", "1000", "--ro-bind", str(passwd), "/etc/passwd", "--", *command]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}",
                               **(env or {})}, check=False)
    assert done.returncode == 0, f"{command}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def student_env(home: Path, name: str, exchange: Path) -> dict:
    """A student's own HOME, user name and nbgrader settings (the course id and exchange)."""
    config = home / ".jupyter"
    config.mkdir(parents=True)
    (config / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        "c.CourseDirectory.course_id = 'gpu-course'\n"
        f"c.Exchange.root = {str(exchange)!r}\n")
    return {"HOME": str(home), "USER": name, "LOGNAME": name,
            "JUPYTER_CONFIG_DIR": str(config), "JUPYTER_DATA_DIR": str(home / "data")}


def test_release_fetch_submit_collect_and_grade(tmp_path, grading_sandbox):
    """Checks two students' submissions travel through the exchange and are graded."""
    course = copy_course(tmp_path / "course")
    out = run([str(BIN / "course"), "gradebook"], course)
    exchange = course / "exchange"
    assert str(exchange) in out and (exchange.stat().st_mode & 0o7777) == 0o1777
    run([str(BIN / "nbgrader"), "release_assignment", LESSON], course)

    solved = nbformat.read(course / "solutions" / LESSON / NOTEBOOK, as_version=4)
    for student in ("alice", "bob"):
        home = tmp_path / f"home-{student}"
        env = student_env(home, student, exchange)
        listed = run([str(BIN / "nbgrader"), "list"], home, env, student)
        assert LESSON in listed, listed
        run([str(BIN / "nbgrader"), "fetch_assignment", LESSON], home, env, student)
        fetched = home / LESSON / NOTEBOOK
        assert fetched.exists()
        if student == "alice":  # alice solves it; bob hands in the release as fetched
            nbformat.write(solved, fetched)
        run([str(BIN / "nbgrader"), "submit", LESSON], home, env, student)

    run([str(BIN / "nbgrader"), "collect", LESSON], course)
    submitted = course / "grading-output" / "submitted"
    assert sorted(path.name for path in submitted.iterdir()) == ["alice", "bob"]
    timestamp = (submitted / "alice" / LESSON / "timestamp.txt").read_text()

    run([str(BIN / "course"), "grade", str(submitted), "--lesson", LESSON, "--jobs", "2"],
        course)
    from course_utils.grading.changes import read_changes
    from course_utils.grading.report import read_csv

    rows = {row.student: row for row in read_csv(course / "grading-output" / "grades.csv")}
    assert (rows["alice"].score, rows["bob"].score) == (4, 0)
    # Graded in place: the timestamp nbgrader submit wrote is the one kept.
    assert (submitted / "alice" / LESSON / "timestamp.txt").read_text() == timestamp

    # Feedback goes out once hand-graded and re-graded (what is held back, and why:
    # test_handback.py).
    give_hand_score(course, "alice", 1.5)
    # The re-grade, with a due date both students missed: the penalty, recomputed.
    policy = course / "late.toml"
    policy.write_text('[penalty]\nmethod = "per-day"\npercent_per_day = 10\n'
                      f'[due]\n"{LESSON}" = 2020-01-01T00:00:00Z\n')
    regraded = run([str(BIN / "course"), "grade", str(submitted), "--lesson", LESSON,
                    "--late-policy", str(policy), "--jobs", "2"], course)
    assert "Changes since the last run: 1 of 2 lesson score(s) changed" in regraded
    rows = {row.student: row for row in read_csv(course / "grading-output" / "grades.csv")}
    assert (rows["alice"].score, rows["alice"].penalty) == (0, 5.5)  # capped at 100 %
    changes = {(change.student, change.column): change.why for change in read_changes(
        course / "grading-output" / "grades-changes.csv")}
    assert changes[("alice", "hardcoded_cuda")] == "hand grade (none → 1.5)"
    assert changes[("alice", "penalty")].startswith("late penalty")
    autograded = nbformat.read(course / "grading-output" / "autograded" / "alice" / LESSON /
                               NOTEBOOK, as_version=4)
    assert autograded.cells[0].source.startswith("**Late:** submitted ")  # what formgrader shows
    released = run([str(BIN / "course"), "release-feedback", LESSON], course)
    assert "1 submission(s)\n  alice 00_setup" in released
    assert "bob 00_setup: not hand-graded yet" in released

    home = tmp_path / "home-alice"
    run([str(BIN / "nbgrader"), "fetch_feedback", LESSON], home,
        student_env_again(home, "alice"), "alice")
    (page,) = (home / LESSON / "feedback").glob("*/setup.html")
    assert "Score: 0 / 6</strong>" in page.read_text() and "1.5 / 2 (graded by hand)" \
        in page.read_text()


def give_hand_score(course: Path, student: str, score: float) -> None:
    """What formgrader does when the instructor scores a written answer."""
    from course_utils.grading import gradebook

    with gradebook.Gradebook(f"sqlite:///{course / 'grading-output' / 'gradebook.db'}") as gb:
        grade = gb.find_grade("hardcoded_cuda", "setup", LESSON, student)
        grade.manual_score, grade.needs_manual_grade = score, False
        gb.db.commit()


def student_env_again(home: Path, name: str) -> dict:
    """The environment student_env made for this student (their settings already written)."""
    config = home / ".jupyter"
    return {"HOME": str(home), "USER": name, "LOGNAME": name,
            "JUPYTER_CONFIG_DIR": str(config), "JUPYTER_DATA_DIR": str(home / "data")}

