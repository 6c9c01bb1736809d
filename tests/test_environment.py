"""The conda environment (the learner's conda route) asks for what pyproject.toml asks for."""
from __future__ import annotations

import re

import tomllib
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from .conftest import ROOT

CONDA_NAMES = {"pytorch": "torch"}  # conda-forge name -> PyPI name


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def conda_requirements(dependencies: list) -> dict[str, SpecifierSet]:
    """environment.yml's conda packages (not pip's), by PyPI name, with their version ranges.
    Conda's `name>=a,<b` reads as PEP 440 for the ranges the course uses."""
    wanted = {}
    for entry in dependencies:
        if isinstance(entry, str):
            requirement = Requirement(entry)
            name = normalise(requirement.name)
            wanted[normalise(CONDA_NAMES.get(name, name))] = requirement.specifier
    return wanted


def pip_requirements(lines: list[str]) -> dict[str, SpecifierSet]:
    return {normalise(Requirement(line).name): Requirement(line).specifier for line in lines}


def load() -> tuple[dict, dict]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project, yaml.safe_load((ROOT / "environment.yml").read_text())


def test_environment_yml_asks_for_pyprojects_dependencies_and_ranges():
    """Checks environment.yml names exactly pyproject's dependencies, each with the same version
    range (PyTorch's too: outside it, pip's `-e .` would install PyPI's torch over conda's),
    and the same Python."""
    project, env = load()
    declared = pip_requirements(project["dependencies"])
    conda = conda_requirements(env["dependencies"])
    python = conda.pop("python")
    conda.pop("pip")
    assert conda.keys() == declared.keys(), (f"only in environment.yml: "
                                             f"{conda.keys() - declared.keys()}; only in "
                                             f"pyproject: {declared.keys() - conda.keys()}")
    differ = {name: (str(conda[name]), str(declared[name])) for name in declared
              if conda[name] != declared[name]}
    assert differ == {}, f"environment.yml's range vs pyproject's: {differ}"
    assert python == SpecifierSet(project["requires-python"])
    assert declared["torch"] == SpecifierSet(">=2.11,<2.16") == conda["torch"]


def test_the_learners_conda_route_installs_no_test_tools():
    """Checks the test extra (pytest, ruff, Playwright...) stays out of the learner's route, and
    pip adds the course itself."""
    project, env = load()
    tools = pip_requirements(project["optional-dependencies"]["test"])
    conda = conda_requirements(env["dependencies"])
    assert tools.keys() & conda.keys() == set()
    pip_entries = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pip_entries == ["-e ."]


def test_a_different_range_is_caught():
    """Checks the comparison sees a range that differs, as environment.yml's `pytorch>=2.7`
    once did."""
    assert conda_requirements(["pytorch>=2.7"])["torch"] != \
        pip_requirements(["torch>=2.11,<2.16"])["torch"]
    assert conda_requirements(["pytorch<2.16,>=2.11"])["torch"] == \
        pip_requirements(["torch>=2.11,<2.16"])["torch"]


def test_lock_pins_torch_2_13():
    """Checks the lock file pins torch exactly, as the course's figures were measured with it."""
    lock = (ROOT / "requirements.lock").read_text()
    assert re.search(r"^torch==2\.13\.0$", lock, re.MULTILINE)
