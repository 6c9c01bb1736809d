"""The `course` command line as an instructor and a CI maintainer use it."""
from __future__ import annotations

import csv
import shutil

import pytest

from course_utils.tools.cli import main

from .conftest import ROOT, run_course


def test_doctor_fails_with_the_reason_once_for_a_missing_device():
    """Checks COURSE_DEVICE=cuda on a CPU machine exits non-zero and says why exactly once."""
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    done = run_course("doctor", env={"COURSE_DEVICE": "cuda"})
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert output.count("asks for device 'cuda'") == 1, output
    verdict = done.stdout.strip().splitlines()[-1]
    assert verdict.startswith("Verdict: NOT ready:") and "Available here: cpu" in verdict


def test_doctor_json_runs(tmp_path):
    """Checks `course doctor --json` exits 0 and names the chosen device."""
    done = run_course("doctor", "--json")
    assert done.returncode == 0, done.stderr
    assert '"device"' in done.stdout


@pytest.mark.parametrize("args, message", [
    (["grade", "no-such-folder"], "does not exist"),
    (["grade", ".", "--jobs", "0"], "at least 1"),
    (["grade", ".", "--lesson", "99_nope"], "'99_nope'"),
    (["grade", ".", "--timeout", "-1"], "--timeout must be a number > 0 (s), got -1.0"),
    (["grade", ".", "--max-notebook-mb", "0"], "--max-notebook-mb must be a number > 0"),
    (["grade", ".", "--memory-mb", "-5"], "--memory-mb must be a number ≥ 0 (0: no cap)"),
    (["release", "99_nope", "--check"], "00_setup"),
])
def test_bad_input_gets_one_clear_error(capsys, monkeypatch, args, message):
    """Checks bad arguments exit 2 with a message naming the bad value."""
    monkeypatch.chdir(ROOT)
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_grade_without_bubblewrap_says_how_to_install_it(tmp_path):
    """Checks `course grade` refuses to run unsandboxed by default, in one line with the fix."""
    done = run_course("grade", str(ROOT / "notebooks"), "--out", str(tmp_path),
                      env={"PATH": str(tmp_path)})  # a PATH without bwrap
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "bwrap was not found" in lines[0] and "sudo apt-get install bubblewrap" in lines[0]
    assert "--unsafe-no-sandbox" in lines[0]
    assert not (tmp_path / "grades.csv").exists()


@pytest.mark.slow
def test_grade_prints_a_row_per_submission(tmp_path, grading_sandbox):
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
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Isolation: bubblewrap")
    assert lines[1].startswith("Limits: cgroup")
    rows = {line.split()[0]: line.split() for line in lines[4:7]}
    assert rows["correct"][2:5] == ["4", "6", "graded"]
    assert rows["blank"][2:5] == ["0", "6", "graded"]
    assert rows["corrupt"][2:5] == ["0", "6", "invalid"]
    with (out / "grades.csv").open() as handle:
        table = {row["student"]: row for row in csv.DictReader(handle)}
    assert table["correct"]["score"] == "4" and table["blank"]["score"] == "0"
    assert table["corrupt"]["status"] == "invalid" and "JSON" in table["corrupt"]["reason"]
    assert (out / "feedback" / "blank" / "00_setup.html").exists()
