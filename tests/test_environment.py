"""The conda environment and the pip project name the same dependencies."""
from __future__ import annotations

import re

import tomllib
import yaml

from .conftest import ROOT

CONDA_NAMES = {"pytorch": "torch"}  # conda-forge name -> PyPI name


def normalise(requirement: str) -> str:
    name = re.split(r"[<>=!~ \[;]", requirement.strip(), maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", name).lower()


def test_environment_yml_matches_pyproject():
    """Checks environment.yml lists exactly pyproject's dependencies and test extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["dependencies"] + project["optional-dependencies"]["test"]
    wanted = {normalise(r) for r in declared}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = {normalise(CONDA_NAMES.get(normalise(d), d)) for d in env["dependencies"]
             if isinstance(d, str)} - {"python", "pip"}
    pip_entries = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert conda == wanted, (f"only in environment.yml: {conda - wanted}; "
                             f"only in pyproject: {wanted - conda}")
    assert "-e ." in pip_entries


def test_lock_pins_torch_2_13():
    """Checks the lock file pins torch exactly, as the course's figures were measured with it."""
    lock = (ROOT / "requirements.lock").read_text()
    assert re.search(r"^torch==2\.13\.0$", lock, re.MULTILINE)
