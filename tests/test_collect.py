"""`course collect`: a class graded in shards, checked for completeness and written whole.

The shards here are recorded as `course grade --shard` records them (shard_record.running,
one result at a time into one gradebook), without grading: what is tested is what `collect`
makes of the records, the gradebook and the shards' folders — a shard never run, one killed,
then the class complete, then a written answer graded by hand in the gradebook.
"""
from __future__ import annotations

import json
import os
import runpy
import signal
import socket
import subprocess
from pathlib import Path

import nbformat
import pytest

from course_utils.grading import gradebook, shard_record, workspace
from course_utils.grading.collect import CollectRequest, check, write_class
from course_utils.grading.records import ItemResult, NotebookResult, Status, SubmissionResult
from course_utils.grading.report import read_csv
from course_utils.grading.shard import Scheduled, Shard
from course_utils.grading.structure import load_lesson

from .conftest import ROOT

LESSON = "00_setup"
STUDENTS = ("ada", "bo", "cy", "di", "ed")
COUNT = 2


def _result(student: str) -> SubmissionResult:
    notebooks = []
    for notebook in load_lesson(ROOT, LESSON).notebooks:
        items = tuple(ItemResult(item.grade_id, item.points, item.points if item.auto else None,
                                 f"check said {student}", item.docstring)
                      for item in notebook.items)
        notebooks.append(NotebookResult(notebook.name, Status.GRADED, "", items))
    return SubmissionResult(student, LESSON, tuple(notebooks))


def _grade_shard(out: Path, submissions: Path, db_url: str, index: int, *,
                 finish: bool = True) -> None:
    """What one `course grade --shard index/COUNT` leaves: its record, kept results, gradebook
    rows and autograded copies; ``finish=False``: a task killed before its first result."""
    shard = Shard(index, COUNT)
    with shard_record.running(out, Scheduled(shard, "slurm"), seed=7, course=ROOT,
                              submissions=submissions, gradebook=db_url, lessons=(),
                              env={"SLURM_ARRAY_JOB_ID": "41", "SLURM_ARRAY_TASK_ID":
                                   str(index)}) as run:
        if not finish:
            return
        mine = [student for student in STUDENTS if shard.holds(student)]
        with gradebook.GradebookWriter(db_url) as writer:
            for student in mine:
                run.keep(writer.record(_result(student)))
                copy = shard_record.folder(out, shard) / "autograded" / student / LESSON
                copy.mkdir(parents=True)
                (copy / "setup.ipynb").write_text("{}", encoding="utf-8")
        run.ended(shard_record.FINISHED, len(mine), 0)


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    """Five students' lesson 00 and a registered SQLite gradebook."""
    folder = tmp_path_factory.mktemp("class")
    submissions = folder / "submissions"
    for student in STUDENTS:
        for source in (ROOT / "solutions" / LESSON).glob("*.ipynb"):
            target = submissions / student / LESSON / source.name
            target.parent.mkdir(parents=True)
            nbformat.write(nbformat.read(source, as_version=4), target)
    db_url = f"sqlite:///{folder / 'gradebook.db'}"
    gradebook.register_lessons(db_url, [load_lesson(ROOT, LESSON)])
    return folder / "grading-output", submissions, db_url


def test_collect_names_the_missing_and_killed_shards_then_writes_the_whole_class(graded_class):
    """Checks, in order: with shard 1 never run, collect names it and the sbatch command for
    exactly it, and writes nothing; with shard 1 killed (record left running, its process
    gone), it says killed; once shard 1 is graded, grades.csv, grades.json, the feedback index
    and formgrader's autograded/ hold all five students; a written answer graded by hand in
    the gradebook afterwards is in grades.csv and the feedback after collecting again."""
    out, submissions, db_url = graded_class
    _grade_shard(out, submissions, db_url, 0)
    request = CollectRequest(ROOT, out)
    checked, _ = check(request)
    assert not checked.complete and [p.index for p in checked.problems] == [1]
    assert "never ran" in checked.problems[0].what
    assert checked.rerun[0].startswith("sbatch --array=1 --export=ALL,COURSE=")
    assert f"--shard 1/{COUNT}" in checked.rerun[1] and "--seed 7" in checked.rerun[1]
    assert not (out / "grades.csv").exists()

    _grade_shard(out, submissions, db_url, 1, finish=False)
    record_path = out / "shard-1" / shard_record.RECORD_FILE
    record = json.loads(record_path.read_text())
    assert record["state"] == shard_record.RUNNING  # a kill leaves it so: fake the kill
    record_path.write_text(json.dumps({**record, "pid": _dead_pid()}))
    checked, _ = check(request)
    assert "was killed" in checked.problems[0].what, checked.report()

    _grade_shard(out, submissions, db_url, 1)
    checked, found = check(request)
    assert checked.complete, checked.report()
    rows = write_class(request, checked, found)
    assert sorted(row.student for row in read_csv(out / "grades.csv")) == sorted(STUDENTS)
    assert len(json.loads((out / "grades.json").read_text())["rows"]) == len(STUDENTS)
    index = (out / "feedback" / "index.html").read_text()
    assert all(f"{student}/{LESSON}.html" in index for student in STUDENTS)
    assert "check said ada" in (out / "feedback" / "ada" / f"{LESSON}.html").read_text()
    assert all((out / "autograded" / s / LESSON / "setup.ipynb").exists() for s in STUDENTS)
    assert all("manual grading" in row.reason for row in rows)  # the written answer waits

    written = next(item for notebook in load_lesson(ROOT, LESSON).notebooks
                   for item in notebook.items if not item.auto)
    with gradebook.Gradebook(db_url) as gb:  # what formgrader does with a hand grade
        grade = gb.find_grade(written.grade_id, "setup", LESSON, "bo")
        grade.manual_score = written.points
        gb.find_comment(written.grade_id, "setup", LESSON, "bo").manual_comment = "Well put."
        gb.db.commit()
    checked, found = check(request)
    write_class(request, checked, found)
    bo = next(row for row in read_csv(out / "grades.csv") if row.student == "bo")
    assert dict(bo.exercises)[written.grade_id] == written.points and not bo.reason
    page = (out / "feedback" / "bo" / f"{LESSON}.html").read_text()
    assert "(graded by hand)" in page and "Well put." in page


def test_a_killed_runs_scratch_is_removed_at_the_next_start_and_a_live_ones_kept(tmp_path):
    """Checks remove_abandoned deletes a scratch folder whose owner process is gone, and keeps
    one whose owner runs (this process) and one without an owner file."""
    folders = {name: tmp_path / f"{workspace.SCRATCH_PREFIX}{name}"
               for name in ("dead", "alive", "unknown")}
    for name, folder in folders.items():
        (folder / "kernel-0").mkdir(parents=True)
        if name != "unknown":
            pid = _dead_pid() if name == "dead" else os.getpid()
            (folder / workspace.OWNER_FILE).write_text(json.dumps(
                {"host": socket.gethostname(), "pid": pid}))
    assert workspace.remove_abandoned(tmp_path) == [folders["dead"]]
    assert folders["alive"].exists() and folders["unknown"].exists()


def test_an_output_folder_that_cannot_be_written_is_refused_in_one_line(tmp_path):
    """Checks --out under a file (what an unwritable folder also gives) names the folder."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="--out .* is not a folder; choose a folder"):
        workspace.require_writable(blocker / "out")


def test_sigterm_becomes_an_exit_that_runs_finally_blocks():
    """Checks SIGTERM (scancel) inside terminate_as_exit raises SystemExit(143)."""
    with pytest.raises(SystemExit) as ended, workspace.terminate_as_exit():
        os.kill(os.getpid(), signal.SIGTERM)
        pytest.fail("SIGTERM did not end the block")
    assert ended.value.code == workspace.TERMINATED_EXIT


def test_cluster_check_refuses_a_task_no_node_can_run_and_names_what_would_fit(tmp_path):
    """Checks the script's #SBATCH request, with the command line over it, against sinfo's
    nodes: 2 CPUs fit a 2-CPU node; 4 CPUs and 16G are refused with the largest that fits."""
    from course_utils.tools.cluster import parse_sinfo, script_request, verdict

    nodes = parse_sinfo("vm|grade*|2|20000\nbig|other|64|512000\n")
    script = ROOT / "docs" / "cluster" / "grade.slurm"
    fits, line = verdict(script_request(script, None, None, "grade"), nodes)
    assert fits and "can run on vm" in line
    fits, line = verdict(script_request(script, 4, "16G", "grade"), nodes)
    assert not fits and "--cpus-per-task=4 --mem=16384M" in line
    assert "sbatch --cpus-per-task=2 --mem=16384M" in line and "\n" not in line


def test_nbgrader_config_names_the_gradebook_from_the_environment(monkeypatch):
    """Checks COURSE_GRADEBOOK_URL sets formgrader's gradebook (psycopg 3 for postgresql://),
    and the SQLite file in grading-output stays the default."""
    from traitlets.config import Config

    def db_url() -> str:
        config = Config()  # what nbgrader hands the file as get_config()
        runpy.run_path(str(ROOT / "nbgrader_config.py"), {"get_config": lambda: config})
        return config.CourseDirectory.db_url

    monkeypatch.delenv("COURSE_GRADEBOOK_URL", raising=False)
    assert db_url() == "sqlite:///grading-output/gradebook.db"
    monkeypatch.setenv("COURSE_GRADEBOOK_URL", "postgresql://grader@db/course")
    assert db_url() == "postgresql+psycopg://grader@db/course"


def test_grade_slurm_says_in_one_line_when_the_job_cannot_run_the_courses_venv(tmp_path):
    """Checks grade.slurm, given a course whose .venv's Python cannot be executed (as one built
    from a Python under someone's home), exits 2 with one line naming where it was built
    from and how to rebuild it."""
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")  # no execute bit: nobody, root included, runs it
    (venv / "pyvenv.cfg").write_text("home = /home/ta/.pyenv/versions/3.11.7/bin\n")
    done = subprocess.run(["bash", str(ROOT / "docs" / "cluster" / "grade.slurm")],
                          env={"PATH": os.environ["PATH"], "COURSE": str(tmp_path)},
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "/home/ta/.pyenv/versions/3.11.7/bin" in done.stderr
    assert "make clean-venv install PYTHON=/usr/bin/python3" in done.stderr
