"""The checks' typed records hold: mypy over course_utils/checks and what it imports (issue 27).

The observations a probe sends across the grader's process seam are TypedDicts and dataclasses
(docs/authoring.md); a check that reads a field under the wrong name or type fails here, in
every `make test`, not in a learner's feedback. The configuration is pyproject.toml's [tool.mypy].
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_checks_type_check(tmp_path):
    result = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=300,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr
