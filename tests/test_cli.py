"""The `course` command line as an instructor and a CI maintainer use it."""
from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys

import pytest

from course_utils.cli import main

from .conftest import ROOT


def run_course(*args, env=None):
    return subprocess.run([sys.executable, "-m", "course_utils", *args], cwd=ROOT, text=True,
                          capture_output=True, env={**os.environ, **(env or {})}, timeout=300)


def test_doctor_fails_in_one_line_for_a_missing_device():
    """Checks COURSE_DEVICE=cuda on a CPU machine exits non-zero with one clear line."""
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    done = run_course("doctor", env={"COURSE_DEVICE": "cuda"})
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cuda" in lines[0] and "cpu" in lines[0]


def test_doctor_json_runs(tmp_path):
    """Checks `course doctor --json` exits 0 and names the chosen device."""
    done = run_course("doctor", "--json")
    assert done.returncode == 0, done.stderr
    assert '"device"' in done.stdout


@pytest.mark.parametrize("args, message", [
    (["grade", "no-such-folder"], "does not exist"),
    (["grade", ".", "--jobs", "0"], "at least 1"),
    (["grade", ".", "--lesson", "99_nope"], "'99_nope'"),
    (["release", "99_nope", "--check"], "00_setup"),
])
def test_bad_input_gets_one_clear_error(capsys, monkeypatch, args, message):
    """Checks bad arguments exit 2 with a message naming the bad value."""
    monkeypatch.chdir(ROOT)
    assert main(args) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow
def test_grade_prints_a_row_per_submission(tmp_path):
    """Checks a correct, a blank and a corrupt submission give full, zero and an error row."""
    submissions = tmp_path / "submissions"
    for student, source in (("correct", ROOT / "solutions"), ("blank", ROOT / "notebooks")):
        shutil.copytree(source / "00_setup", submissions / student / "00_setup")
    corrupt = submissions / "corrupt" / "00_setup" / "setup.ipynb"
    corrupt.parent.mkdir(parents=True)
    corrupt.write_text('{"cells": [')
    out = tmp_path / "out"
    done = run_course("grade", str(submissions), "--out", str(out), "--jobs", "2")
    assert done.returncode == 1, done.stdout + done.stderr  # one submission could not be graded
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[2:5]}
    assert rows["correct"][2:5] == ["4", "6", "graded"]
    assert rows["blank"][2:5] == ["0", "6", "graded"]
    assert rows["corrupt"][2:5] == ["0", "6", "invalid"]
    with (out / "grades.csv").open() as handle:
        table = {row["student"]: row for row in csv.DictReader(handle)}
    assert table["correct"]["score"] == "4" and table["blank"]["score"] == "0"
    assert table["corrupt"]["status"] == "invalid" and "JSON" in table["corrupt"]["reason"]
    assert (out / "feedback" / "blank" / "00_setup.html").exists()
