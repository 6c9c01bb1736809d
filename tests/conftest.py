"""Shared fixtures and the rule that GPU tests skip, with a reason, where no CUDA device exists."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


DURATIONS = ROOT / "tests" / "durations.json"  # seconds per file, written by `make test-durations`
DEFAULT_S = 10.0  # a file not measured yet


def longest_first(items: list) -> None:
    """Files in the order of their measured seconds, longest first, tests within a file as
    collected: `--dist loadfile` (with --no-loadscope-reorder, Makefile) hands files to the
    workers in this order, so a long file never starts last while the others sit idle."""
    seconds = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    rank = {}
    for item in items:
        name = item.nodeid.split("::")[0]
        rank.setdefault(name, -seconds.get(name, DEFAULT_S))
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])  # stable: order within a file


def pytest_collection_modifyitems(config, items):
    longest_first(items)
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device; none is available on this machine")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def no_course_device(monkeypatch):
    """Tests must not depend on the developer's COURSE_DEVICE (get_device obeys it)."""
    monkeypatch.delenv("COURSE_DEVICE", raising=False)


@pytest.fixture(scope="session")
def course_root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def grading_sandbox():
    """The bubblewrap sandbox `course grade` needs; skip (fail under CI) where it cannot run."""
    from course_utils.grading import sandbox

    isolation = sandbox.detect()
    if not isolation.sandboxed:
        message = f"needs the grading sandbox: {isolation.problem}"
        if os.environ.get("CI"):  # CI installs bubblewrap (.ci/run): its absence is a failure
            pytest.fail(message)
        pytest.skip(message)
    return isolation


@pytest.fixture(scope="session", autouse=True)
def grading_limits_or_none():
    """Whole-submission limits (cgroups) where they can be set; elsewhere (a CI runner
    without root, say) the grading tests run as with --unsafe-no-limits, and say so, while
    tests/test_grading_limits.py skips."""
    from course_utils.grading import cgroups

    control = cgroups.detect()
    if not control.enforced and cgroups.ENV_UNSAFE not in os.environ:
        os.environ[cgroups.ENV_UNSAFE] = "1"  # read by `course grade`, here and in children
        print(f"note: grading tests run without cgroup limits here: {control.problem}")
    return control


def run_course(*args, env=None, timeout=900, **kwargs):
    """`course ARGS...` in a fresh process, from the course root, as an instructor runs it."""
    return subprocess.run([sys.executable, "-m", "course_utils", *args], check=False,
                          cwd=ROOT, text=True,
                          capture_output=True, env={**os.environ, **(env or {})},
                          timeout=timeout, **kwargs)


def course_state(root: Path = ROOT) -> str:
    """What git sees of the course (tracked changes and untracked files), to compare later."""
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"],
                            cwd=root, capture_output=True, text=True, check=True).stdout
    diff = subprocess.run(["git", "diff", "HEAD"], cwd=root, capture_output=True, text=True,
                          check=True).stdout
    return status + "\n" + diff
