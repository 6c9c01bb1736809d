"""`make` on a fresh clone: a Python too old for the course stops in one clear line, and a
.venv made by one is rebuilt instead of kept (pip would end in a bare ResolutionImpossible)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def fake_python(path: Path, version: str, venv_python: str | None = None) -> Path:
    """A stand-in interpreter: reports ``version``; ``-m venv DIR`` makes DIR/bin/python from
    ``venv_python``; ``-m pip`` fails at once (the tests stop before any install)."""
    major, minor = (int(part) for part in version.split(".")[:2])
    new_venv = (f'mkdir -p "$3/bin" && cp "{venv_python}" "$3/bin/python"; exit 0'
                if venv_python else "exit 1")
    path.write_text(f"""#!/bin/sh
case "$1" in
  --version) echo "Python {version}";;
  -c) [ {major} -gt 3 ] || [ {minor} -ge 10 ];;
  -m) if [ "$2" = venv ]; then {new_venv}; else echo "pip: stopped by the test" >&2; exit 3; fi;;
esac
""")
    path.chmod(0o755)
    return path


@pytest.fixture
def clone(tmp_path):
    for name in ("Makefile", "pyproject.toml", "requirements.lock"):
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def make(clone, *args):
    return subprocess.run(["make", "--no-print-directory", *args], check=False, cwd=clone,
                          text=True, capture_output=True, timeout=60)


def test_a_python_older_than_3_10_stops_in_one_line(clone):
    old = fake_python(clone / "python3.9", "3.9.18")
    done = make(clone, "lab", f"PYTHON={old}")
    assert done.returncode != 0
    message = done.stdout.strip()
    assert message.startswith("The course needs Python 3.10 or newer") and "3.9.18" in message
    assert "PYTHON=python3.12" in message and len(message.splitlines()) == 1
    assert not (clone / ".venv").exists()


@pytest.mark.parametrize("missing", ["nosuchpython", "pyenv-shim"])
def test_a_python_that_is_not_there_is_named_not_found(clone, missing):
    """Checks a name on no PATH, or a pyenv shim for a version not installed (it prints its own
    lines and exits 127), gives one line saying it was not found, not a version complaint."""
    if missing == "pyenv-shim":
        shim = clone / "python3.9"
        shim.write_text('#!/bin/sh\necho "pyenv: python3.9: command not found" >&2\n'
                        'echo "The `python3.9\' command exists in these Python versions:" >&2\n'
                        "exit 127\n")
        shim.chmod(0o755)
        missing = str(shim)
    done = make(clone, "lab", f"PYTHON={missing}")
    assert done.returncode != 0
    assert done.stdout == (f"The course needs Python 3.10 or newer, and '{missing}' was not "
                           "found: run 'make lab PYTHON=python3.12' (any Python >= 3.10).\n")
    assert not (clone / ".venv").exists()


def test_a_venv_made_by_an_old_python_is_rebuilt(clone):
    old = fake_python(clone / "old-python", "3.9.18")
    new_venv_python = fake_python(clone / "new-venv-python", "3.12.4")
    new = fake_python(clone / "python3.12", "3.12.4", venv_python=str(new_venv_python))
    (clone / ".venv" / "bin").mkdir(parents=True)
    shutil.copy(old, clone / ".venv" / "bin" / "python")
    done = make(clone, "lab", f"PYTHON={new}")
    assert "Rebuilding .venv: it was made by a Python older than 3.10." in done.stdout
    rebuilt = subprocess.run([clone / ".venv" / "bin" / "python", "--version"], check=True,
                             capture_output=True, text=True)
    assert "Python 3.12.4" in rebuilt.stdout
    assert "pip: stopped by the test" in done.stderr  # it went on to install into the new one
