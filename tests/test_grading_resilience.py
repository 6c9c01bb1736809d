"""`course grade` loses no one's grade: not to a dead worker, not to Ctrl-C.

Without the sandbox a submission can kill its grading worker; the pool is rebuilt and only
that submission pays. The same run shows that the corpus's gradebook attack is real: it
succeeds there, which is what makes its failure in the sandboxed corpus run mean something.
"""
from __future__ import annotations

import copy
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time

import nbformat
import pytest

from course_utils.grading.records import Limits
from course_utils.grading.report import read_csv
from course_utils.grading.request import GradeRequest
from course_utils.grading.runner import grade

from . import grading_corpus as corpus
from .conftest import ROOT, run_course

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def solution():
    return nbformat.read(ROOT / "solutions" / corpus.LESSON / corpus.NOTEBOOK, as_version=4)


def write_cases(folder, solution, names):
    cases = {case.student: case for case in corpus.CASES}
    for name in names:
        corpus.write_case(cases[name], solution, folder, ROOT)


def test_without_the_sandbox_a_dead_worker_costs_only_its_submission(tmp_path, solution):
    """Checks a kernel that kills its worker keeps its earned credit and no one else's changes,
    and that the gradebook attack lands when nothing hides the gradebook."""
    submissions, out = tmp_path / "submissions", tmp_path / "out"
    write_cases(submissions, solution, ["honest", "kill-parent", "write-gradebook", "unsolved"])
    done = run_course("grade", str(submissions), "--out", str(out), "--jobs", "1", "--seed", "1",
                      "--unsafe-no-sandbox")
    assert done.stdout.startswith("Isolation: none (--unsafe-no-sandbox)"), done.stdout
    assert "WARNING: grading without a sandbox" in done.stderr
    rows = {row.student: row for row in read_csv(out / "grades.csv")}
    killer = rows["kill-parent"]
    assert (killer.score, killer.status.value) == (2, "kernel-died"), killer  # the worker died
    assert "the grading worker died" in killer.reason
    assert (rows["honest"].score, rows["honest"].status.value) == (4, "graded")
    assert (rows["unsolved"].score, rows["unsolved"].status.value) == (0, "graded")
    with sqlite3.connect(out / "gradebook.db") as db:
        triggers = db.execute("select name from sqlite_master where type = 'trigger'").fetchall()
        hundreds = db.execute("select count(*) from grade where auto_score = 100").fetchone()[0]
    assert triggers == [("full_marks",)]  # installed by the write-gradebook submission
    assert hundreds >= 2  # its own two exercises, recorded after it, were turned into 100s


def _group(pgid: int) -> list[str]:
    """Command lines of the processes still in a process group."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getpgid(int(pid)) == pgid:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    found.append(handle.read().replace(b"\0", b" ").decode())
        except OSError:
            pass
    return found


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if text.encode() in handle.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def test_ctrl_c_keeps_every_grade_already_earned(tmp_path, solution, grading_sandbox):
    """Checks Ctrl-C mid-run writes the finished grades (CSV, gradebook, feedback), exits 130
    saying what was left, and leaves no kernel behind."""
    submissions, out = tmp_path / "submissions", tmp_path / "out"
    token = f"{secrets.randbelow(10**6) + 10**6}.5"  # a detached child the kernel starts
    sleeper = copy_with_cell_before(solution, "pick_device", (
        "import subprocess, time\n"
        f"subprocess.Popen(['sleep', '{token}'], start_new_session=True)\n"
        "time.sleep(600)\n"))
    nbformat.write(sleeper, _target(submissions, "sleeper"))
    for name in ("quick-1", "quick-2", "quick-3"):
        nbformat.write(solution, _target(submissions, name))
    command = [sys.executable, "-m", "course_utils", "grade", str(submissions), "--out", str(out),
               "--jobs", "2", "--seed", "1", "--cell-timeout", "500", "--timeout", "550"]
    grader = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True)
    progress = []
    while len(progress) < 3:  # the sleeper (biggest, first) holds one worker; 3 quick ones done
        line = grader.stderr.readline()
        assert line, f"the grader stopped early: {grader.wait()} {grader.stdout.read()}"
        if line.startswith("["):
            progress.append(line)
    assert not any("sleeper" in line for line in progress)
    os.killpg(grader.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
    stopped = time.monotonic()
    stdout, stderr = grader.communicate(timeout=120)
    assert grader.returncode == 130, stdout + stderr
    assert time.monotonic() - stopped < 30
    assert "Interrupted: 3 submission(s) graded and recorded; 1 not graded" in stdout
    rows = read_csv(out / "grades.csv")
    assert sorted((row.student, row.score, row.status.value) for row in rows) == [
        ("quick-1", 4, "graded"), ("quick-2", 4, "graded"), ("quick-3", 4, "graded")]
    with sqlite3.connect(out / "gradebook.db") as db:
        recorded = db.execute("select student.id from submitted_assignment join student on "
                              "submitted_assignment.student_id = student.id").fetchall()
    assert sorted(recorded) == [("quick-1",), ("quick-2",), ("quick-3",)]
    assert sorted(path.name for path in (out / "feedback").iterdir()) == [
        "quick-1", "quick-2", "quick-3"]
    deadline = time.monotonic() + 10
    while _group(grader.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _group(grader.pid) == []  # no worker is left
    while _processes_mentioning(token) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_mentioning(token) == []  # nor anything the sleeper's kernel started


def copy_with_cell_before(nb, grade_id, source):
    nb = copy.deepcopy(nb)
    index = next(i for i, c in enumerate(nb.cells)
                 if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    nb.cells.insert(index, nbformat.v4.new_code_cell(source))
    return nb


def _target(submissions, student):
    path = submissions / student / corpus.LESSON / corpus.NOTEBOOK
    path.parent.mkdir(parents=True)
    return path


def test_a_kernel_that_does_not_start_is_kernel_died(tmp_path, solution, grading_sandbox):
    """Checks a kernel that misses its start-up limit gives `kernel-died` with the reason
    (it used to raise a NameError in the worker and become `error`)."""
    write_cases(tmp_path / "submissions", solution, ["honest"])
    outcome = grade(GradeRequest(ROOT, tmp_path / "submissions", tmp_path / "out", seed=1,
                                 limits=Limits(startup_timeout=0.01)))
    [row] = outcome.rows
    assert (row.score, row.status.value) == (0, "kernel-died"), row
    assert row.reason == "the kernel did not start in time"
