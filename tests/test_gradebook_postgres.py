"""A real PostgreSQL gradebook, shared by `course grade` runs on halves of a class at once.

The server is Debian's `postgresql` (`.ci/run` installs it), started here with initdb and
pg_ctl in a temporary folder on a free port — as an unprivileged user when the tests run
as root, since PostgreSQL refuses to run as root — and stopped at the end.
"""
from __future__ import annotations

import glob
import multiprocessing
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from course_utils.grading import gradebook
from course_utils.grading.records import ItemResult, NotebookResult, Status, SubmissionResult
from course_utils.grading.report import read_csv
from course_utils.grading.structure import load_lesson

from .conftest import ROOT, run_course

LESSONS = ("00_setup", "01_tensors_devices")


def _server_binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda path: int(Path(path).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def postgres():
    """A running PostgreSQL server: its admin URL (no password, local trust)."""
    binaries = _server_binaries()
    if binaries is None:
        message = ("PostgreSQL's server binaries (initdb, pg_ctl) are not installed; "
                   "install Debian's `postgresql` package (.ci/run does)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    folder = Path(tempfile.mkdtemp(prefix="course-pg-"))
    run_as = {}
    if os.geteuid() == 0:  # postgres refuses to run as root: use an unprivileged account
        nobody = pwd.getpwnam("nobody")
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
        run_as = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
    data, port = folder / "data", _free_port()
    env = {"PATH": os.environ["PATH"], "LC_ALL": "C", "HOME": str(folder)}
    subprocess.run([binaries / "initdb", "-D", data, "-U", "postgres", "--auth=trust",
                    "--no-sync", "--encoding=UTF8", "--locale=C"], check=True,
                   capture_output=True, env=env, **run_as)
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off"
    subprocess.run([binaries / "pg_ctl", "-D", data, "-l", folder / "server.log", "-o", options,
                    "-w", "-t", "120", "start"], check=True, capture_output=True, env=env,
                   **run_as)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run([binaries / "pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"],
                       check=False, capture_output=True, env=env, **run_as)
        shutil.rmtree(folder, ignore_errors=True)


def _create_database(admin_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(f"{admin_url}/postgres", autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return f"{admin_url}/{name}"


def _result(student: str, lesson: str, score: float) -> SubmissionResult:
    notebooks = []
    for notebook in load_lesson(ROOT, lesson).notebooks:
        items = tuple(ItemResult(item.grade_id, item.points, None if not item.auto else score,
                                 "message") for item in notebook.items)
        notebooks.append(NotebookResult(notebook.name, Status.GRADED, "", items))
    return SubmissionResult(student, lesson, tuple(notebooks))


def _set_up_and_record(db_url: str, lesson: str, students: list[str]) -> None:
    """What one `course grade` run does to the gradebook, without the grading."""
    lessons = [load_lesson(ROOT, name) for name in LESSONS]
    gradebook.register_lessons(db_url, lessons)
    with gradebook.GradebookWriter(db_url) as writer:
        for student in students:
            writer.record(_result(student, lesson, 1.0))


@pytest.mark.slow
def test_concurrent_runs_set_up_one_gradebook_and_lose_no_row(postgres):
    """Checks four runs starting at once on a fresh database all finish, and every row they
    recorded is there — the same students in different lessons included (a unique-key race)."""
    db_url = _create_database(postgres, "race")
    context = multiprocessing.get_context("spawn")
    plan = [("00_setup", ["ada", "bo"]), ("01_tensors_devices", ["ada", "bo"]),
            ("00_setup", ["cy", "di"]), ("01_tensors_devices", ["cy", "di", "ed"])]
    runs = [context.Process(target=_set_up_and_record, args=(db_url, lesson, students))
            for lesson, students in plan]
    for run in runs:
        run.start()
    for run in runs:
        run.join(timeout=300)
    assert [run.exitcode for run in runs] == [0, 0, 0, 0]
    with gradebook.Gradebook(gradebook.database_url(db_url)) as gb:
        assert sorted(a.name for a in gb.assignments) == list(LESSONS)
        assert sorted(s.id for s in gb.students) == ["ada", "bo", "cy", "di", "ed"]
        recorded = sorted((s.assignment.name, s.student.id) for lesson in LESSONS
                          for s in gb.assignment_submissions(lesson))
    assert recorded == sorted((lesson, student) for lesson, students in plan
                              for student in students)


def _write_class(folder: Path) -> list[str]:
    """Four students' lesson 00: two solutions and two blank releases."""
    students = []
    for lesson in LESSONS[:1]:
        for kind, base in (("solved", "solutions"), ("blank", "notebooks")):
            for index in range(2):
                student = f"{kind}{index}"
                for source in (ROOT / base / lesson).glob("*.ipynb"):
                    target = folder / student / lesson / source.name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    nbformat.write(nbformat.read(source, as_version=4), target)
                students.append(student)
    return sorted(set(students))


def _grades(db_url: str) -> dict[tuple[str, str, str], float | None]:
    """(lesson, student, cell) -> auto score, read with nbgrader's own API."""
    grades = {}
    with gradebook.Gradebook(gradebook.database_url(db_url)) as gb:
        for lesson in gb.assignments:
            for submission in gb.assignment_submissions(lesson.name):
                for notebook in submission.notebooks:
                    for grade in notebook.grades:
                        grades[(lesson.name, submission.student.id, grade.name)] = grade.auto_score
                grades[(lesson.name, submission.student.id, "total")] = submission.score
    return grades


@pytest.mark.slow
def test_two_shards_graded_at_once_equal_one_sqlite_run(postgres, tmp_path, grading_sandbox):
    """Checks `course grade --shard 0/2` and `--shard 1/2` on the same class folder, into one
    fresh PostgreSQL database at the same moment, grade each student once and record exactly
    what one SQLite run of the class records; `course collect` then writes the grades.csv
    of that one run."""
    whole = tmp_path / "class"
    students = _write_class(whole)
    db_url = _create_database(postgres, "course")
    out = tmp_path / "out"
    runs = [subprocess.Popen(
        [*_course("grade", str(whole), "--out", str(out), "--db", db_url,
                  "--seed", "7", "--shard", f"{index}/2")], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True) for index in range(2)]
    outputs = [run.communicate(timeout=900) for run in runs]
    for run, (stdout, stderr) in zip(runs, outputs, strict=True):
        assert run.returncode == 0, stdout + stderr
    graded = [{row.student for row in read_csv(out / f"shard-{index}" / "grades.csv")}
              for index in range(2)]
    assert graded[0].isdisjoint(graded[1]) and graded[0] | graded[1] == set(students)
    assert graded[0] and graded[1]  # both shards had work
    sqlite = run_course("grade", str(whole), "--out", str(tmp_path / "out-sqlite"), "--seed", "7",
                        "--jobs", "2")
    assert sqlite.returncode == 0, sqlite.stdout + sqlite.stderr
    on_postgres = _grades(db_url)
    assert len(on_postgres) > len(students)  # every student's cells, and totals
    assert on_postgres == _grades(f"sqlite:///{tmp_path / 'out-sqlite' / 'gradebook.db'}")
    assert on_postgres[("00_setup", "solved0", "total")] == 4
    assert on_postgres[("00_setup", "blank1", "total")] == 0
    collected = run_course("collect", "--out", str(out), "--db", db_url)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert "Complete: 2 shard(s) finished" in collected.stdout
    assert read_csv(out / "grades.csv") == read_csv(tmp_path / "out-sqlite" / "grades.csv")


def _course(*args):
    return [sys.executable, "-m", "course_utils", *args]
