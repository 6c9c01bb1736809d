"""`course lab`: every route into the course (make lab, make instructor, conda) opens the same
lab, with the course's settings (course_utils/tools/lab.py, jupyter/README.md)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from course_utils.tools import cli, lab

from .conftest import ROOT
from .test_browser import free_port


def test_the_learners_settings_come_first_and_the_callers_are_kept():
    """Checks the learner's and instructor's config folders lead Jupyter's search paths, with
    the caller's own folders after them, and only the instructor's lab gets the tools' PATH."""
    environ = {"JUPYTER_CONFIG_PATH": "/mine", "PATH": "/usr/bin"}
    learner = lab.lab_environment(ROOT, instructor=False, environ=environ)
    assert learner["JUPYTER_CONFIG_PATH"] == f"{ROOT / 'jupyter' / 'learner'}{os.pathsep}/mine"
    assert learner["JUPYTER_PATH"] == str(ROOT / "jupyter" / "share")
    assert learner["PATH"] == "/usr/bin"
    teacher = lab.lab_environment(ROOT, instructor=True, environ={})
    assert teacher["JUPYTER_CONFIG_PATH"] == str(ROOT / "jupyter" / "instructor")
    assert teacher["PATH"] == str(Path(sys.executable).parent)


def test_the_command_roots_the_learners_lab_in_notebooks():
    """Checks the lab's root, its settings folder and the flags passed through."""
    learner = lab.lab_command(ROOT, instructor=False, flags=["--no-browser", "--port=9"])
    assert learner[:3] == [sys.executable, "-m", "jupyterlab"]
    assert f"--ServerApp.root_dir={ROOT / 'notebooks'}" in learner
    assert f"--LabApp.app_settings_dir={ROOT / 'jupyter' / 'lab-settings'}" in learner
    assert learner[-2:] == ["--no-browser", "--port=9"]
    assert f"--ServerApp.root_dir={ROOT}" in lab.lab_command(ROOT, instructor=True, flags=[])


def test_course_lab_passes_jupyters_flags_on_and_other_commands_refuse_them(monkeypatch,
                                                                            capsys):
    """Checks `course lab --no-browser --port 8899` reaches the lab, and a stray flag on another
    command is still an error."""
    seen = {}
    monkeypatch.setattr(lab, "main", lambda instructor, flags: seen.update(
        instructor=instructor, flags=flags) or 0)
    assert cli.main(["lab", "--no-browser", "--port", "8899", "--IdentityProvider.token=x"]) == 0
    assert seen == {"instructor": False,
                    "flags": ["--no-browser", "--port", "8899", "--IdentityProvider.token=x"]}
    assert cli.main(["lab", "--instructor", "--no-browser"]) == 0
    assert seen == {"instructor": True, "flags": ["--no-browser"]}
    with pytest.raises(SystemExit):
        cli.main(["release", "--no-browser"])
    assert "unrecognized arguments: --no-browser" in capsys.readouterr().err


def test_make_starts_both_labs_through_course_lab():
    """Checks `make lab` and `make instructor` run `course lab`, so that the conda route's
    `course lab` opens the same lab."""
    for target, command in (("lab", "course lab --port=1"),
                            ("instructor", "course lab --instructor --port=1")):
        # --no-print-directory: under `make test` a nested make prints "Entering directory".
        planned = subprocess.run(["make", "--no-print-directory", "-n", "-W", "pyproject.toml",
                                  target, "LAB_FLAGS=--port=1"], cwd=ROOT, capture_output=True,
                                 text=True, check=True).stdout
        last = planned.strip().splitlines()[-1]
        assert last == f".venv/bin/{command}", planned


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, b""
    except OSError:  # not listening yet
        return 0, b""


@pytest.mark.slow
def test_course_lab_from_any_folder_opens_the_learners_lab(tmp_path):
    """Checks `course lab` started outside the course (as from a conda prompt) serves the
    released lessons with the learner's tools: Validate, no formgrader, the course's settings."""
    port, token = free_port(), "lab-test"
    log = tmp_path / "lab.log"
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("JUPYTER_", "COURSE_ROOT"))}
    with log.open("w") as output:
        process = subprocess.Popen(
            [str(Path(sys.executable).parent / "course"), "lab", "--no-browser",
             f"--port={port}", "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}",
             "--ServerApp.port_retries=0"],
            cwd=tmp_path, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
            env={**env, "JUPYTER_PLATFORM_DIRS": "1", "HOME": str(tmp_path)})
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while _get(f"{base}/api/status?token={token}")[0] != 200:
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.3)
        status, body = _get(f"{base}/api/contents?token={token}")
        assert status == 200
        assert {item["name"] for item in json.loads(body)["content"]} >= {"00_setup", "08_overhead"}
        assert _get(f"{base}/formgrader?token={token}")[0] == 404
        assert _get(f"{base}/nbgrader_version?version=0&token={token}")[0] == 200  # Validate's
        status, body = _get(f"{base}/lab/api/settings/@jupyterlab/notebook-extension:tracker"
                            f"?token={token}")
        schema = json.loads(body)["schema"]["properties"]
        assert schema["enableKernelInitNotification"]["default"] is True  # lab-settings/
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
