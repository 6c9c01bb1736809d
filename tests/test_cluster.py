"""docs/cluster.md's route on a real single-node Slurm, to the whole class's grades.

`make test-cluster` runs it (about 3 to 5 minutes: it grades a class); `make test` skips it.
It starts munged, slurmctld and slurmd in a temporary folder (tests/slurm_cluster.py) and a
PostgreSQL server (tests/test_gradebook_postgres.py), then follows the documented commands:
`course cluster-check`; an array submitted as a re-run before any whole one (refused in one
line by every task); the whole array with one task cancelled mid-grading (its scratch gone,
its record `interrupted`); `course collect` naming that shard and the sbatch command for it;
that command; `course collect` complete; a written answer graded by hand in the gradebook;
`course collect` again, the hand grade in grades.csv.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from course_utils.grading import gradebook
from course_utils.grading.report import read_csv
from course_utils.grading.shard import Shard
from course_utils.grading.structure import load_lesson

from .conftest import ROOT, run_course
from .slurm_cluster import missing, single_node_slurm
from .test_gradebook_postgres import _create_database, postgres  # noqa: F401 (a fixture)

RUN_IT = "COURSE_CLUSTER_TEST"  # set by `make test-cluster`
LESSON = "00_setup"
STUDENTS = [f"{kind}{index}" for index in range(3) for kind in ("solved", "blank")]
TASKS = 4

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get(RUN_IT) != "1",
                       reason="a real Slurm cluster, ~3-5 min: `make test-cluster` runs it"),
]


@pytest.fixture(scope="module")
def slurm():
    why_not = missing()
    if why_not:
        pytest.fail(why_not)  # asked for by make test-cluster: not there is a failure
    # Not under pytest's own temporary folder: munged wants every folder above its socket
    # open to all users, and pytest's is private.
    folder = Path(tempfile.mkdtemp(prefix="course-slurm-"))
    folder.chmod(0o755)
    try:
        with single_node_slurm(folder / "cluster") as env:
            yield env
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _write_class(folder: Path) -> None:
    for student in STUDENTS:
        base = "solutions" if student.startswith("solved") else "notebooks"
        for source in (ROOT / base / LESSON).glob("*.ipynb"):
            target = folder / student / LESSON / source.name
            target.parent.mkdir(parents=True)
            nbformat.write(nbformat.read(source, as_version=4), target)


def _run(command: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, f"{shlex.join(command)}: {done.stdout}{done.stderr}"
    return done.stdout


def _wait_until_done(job: str, env: dict[str, str], seconds: float = 600) -> None:
    deadline = time.monotonic() + seconds
    while _run(["squeue", "-h", "-j", job], env, ROOT).strip():
        assert time.monotonic() < deadline, f"job {job} still queued after {seconds} s"
        time.sleep(1)


def _log(folder: Path, job: str, task: int) -> str:
    path = folder / f"grade-{job}-{task}.log"
    return path.read_text(errors="replace") if path.exists() else ""


@pytest.fixture
def scratch():
    """The jobs' TMPDIR: short, since kernels' sockets live under it (at most 107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="cs-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_documented_route_grades_the_whole_class_on_slurm(slurm, postgres,  # noqa: F811
                                                               scratch, tmp_path):
    """Checks docs/cluster.md's commands on a fresh single-node Slurm end with every student
    in grades.csv and a hand-graded written answer in it (see the module's docstring)."""
    submissions, out, logs = (tmp_path / name for name in ("submissions", "out", "logs"))
    _write_class(submissions)
    logs.mkdir()
    db_url = _create_database(postgres, "cluster")
    env = {**slurm, "TMPDIR": str(scratch)}  # the jobs' scratch folders, checked below
    script = str(ROOT / "docs" / "cluster" / "grade.slurm")
    exports = (f"--export=ALL,COURSE={ROOT},SUBMISSIONS={submissions},DB_URL={db_url},SEED=7,"
               f"OUT={out}")
    small = ["--cpus-per-task=1", "--mem=2G"]

    assert run_course("cluster-check", env=env).returncode == 0
    too_big = run_course("cluster-check", "--cpus-per-task", "64", env=env)
    assert too_big.returncode == 1 and "No node can run a task" in too_big.stderr

    # A part of an array before any whole one: N is unknown, every task refuses.
    job = _run(["sbatch", "--parsable", "--array=1-2", *small, exports, script], env,
               logs).strip()
    _wait_until_done(job, env)
    assert "--shard auto: this array (1-2, 2 tasks) is not 0-(N-1)" in _log(logs, job, 1)
    assert not out.exists() or not list(out.glob("shard-*"))

    # The whole array; the shard with the most students is cancelled after its first result.
    sizes = {index: sum(Shard(index, TASKS).holds(s) for s in STUDENTS) for index in range(TASKS)}
    cancelled = max(sizes, key=sizes.get)
    assert sizes[cancelled] >= 2
    job = _run(["sbatch", "--parsable", f"--array=0-{TASKS - 1}", *small, exports, script],
               env, logs).strip()
    deadline = time.monotonic() + 400
    while "[1/" not in _log(logs, job, cancelled):
        assert time.monotonic() < deadline, _log(logs, job, cancelled)
        time.sleep(0.5)
    _run(["scancel", f"{job}_{cancelled}"], env, logs)
    _wait_until_done(job, env)
    record = (out / f"shard-{cancelled}" / "shard.json").read_text()
    assert '"state": "interrupted"' in record, _log(logs, job, cancelled)
    assert not list(scratch.glob("course-grade-*")), "a cancelled task left its scratch folder"

    collected = run_course("collect", "--out", str(out), "--db", db_url, env=env)
    assert collected.returncode == 1, collected.stdout + collected.stderr
    assert f"shard {cancelled}/{TASKS}: was interrupted" in collected.stdout
    rerun = next(line.strip() for line in collected.stdout.splitlines()
                 if line.strip().startswith("sbatch "))
    assert f"--array={cancelled} " in rerun
    sbatch, *options = shlex.split(rerun)  # as printed, and --parsable for the job's id
    job = _run([sbatch, "--parsable", *options], env, logs).strip()
    _wait_until_done(job, env)

    collected = run_course("collect", "--out", str(out), "--db", db_url, env=env)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    rows = read_csv(out / "grades.csv")
    assert sorted(row.student for row in rows) == sorted(STUDENTS)
    assert {row.student: row.score for row in rows}["solved0"] == 4
    assert (out / "autograded" / "solved0" / LESSON).is_dir()  # where formgrader reads

    written = next(item for notebook in load_lesson(ROOT, LESSON).notebooks
                   for item in notebook.items if not item.auto)
    with gradebook.Gradebook(gradebook.database_url(db_url)) as gb:  # formgrader's write
        grade = gb.find_grade(written.grade_id, "setup", LESSON, "solved0")
        grade.manual_score = written.points
        gb.db.commit()
    collected = run_course("collect", "--out", str(out), env={**env,
                                                              "COURSE_GRADEBOOK_URL": db_url})
    assert collected.returncode == 0, collected.stdout + collected.stderr
    solved0 = next(row for row in read_csv(out / "grades.csv") if row.student == "solved0")
    assert dict(solved0.exercises)[written.grade_id] == written.points
    assert solved0.score == 4 + written.points and not solved0.reason
