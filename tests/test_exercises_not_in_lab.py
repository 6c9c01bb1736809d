"""No exercise is answered by the learner's own package (course_utils/lab, one `??` away).

Two ways an exercise can be: lab/ exports a name the exercise asks the learner to write, or a
lab helper the lesson imports passes the exercise's check as it is. Both fail here, unless the
pair is in ALLOWED with its reason. A check's own references live on the trusted side
(checks/), never in lab/.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import json
import warnings
from pathlib import Path

import pytest

from course_utils.checks import REGISTRY
from course_utils.checks.framework import run_probe

from .conftest import ROOT
from .solutions import solution
from .test_layers import PACKAGE, cell_code, face_names, lesson_sources

# (lesson, name) or (lesson, check, helper) -> why the pair is allowed although the rule forbids it.
ALLOWED: dict[tuple[str, str], str] = {
    ("00_setup", "check_pick_device", "course_utils.lab.devices.get_device"):
        "get_device() is the course's one device choice, used by every lesson's first cell; "
        "lesson 00 has the learner write its core (CUDA, else MPS, else the CPU) on purpose",
    ("06_mixed_precision", "amp_step"):
        "precision.amp_step takes an AmpPolicy, not the exercise's dtype and max_norm, and its "
        "check fails it; lesson 06 uses it after its exercise; not yet renamed",
}


def exercise_names(sources: dict[str, str], solution_cells: set[str]) -> dict[str, set[str]]:
    """Per lesson, the functions and classes its solution cells ask the learner to write (a
    %%writefile cell writes a script, not a name of the kernel)."""
    names: dict[str, set[str]] = {}
    for where, text in sources.items():
        if where not in solution_cells or text.lstrip().startswith("%%"):
            continue
        tree = ast.parse(cell_code(text), where)
        names.setdefault(where.split("/")[0], set()).update(
            node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)))
    return names


def lab_exports(root: Path = PACKAGE) -> dict[str, str]:
    """Every name a lab/ module offers (its __all__, else its public top-level names)."""
    exports = {}
    for path in sorted((root / "lab").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        offered = next((ast.literal_eval(node.value) for node in tree.body
                        if isinstance(node, ast.Assign) and any(
                            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)),
                       None)
        if offered is None:
            offered = [node.name for node in tree.body if isinstance(
                node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")]
        exports.update({name: module for name in offered})
    return exports


def names_lab_answers(exercises: dict[str, set[str]], exports: dict[str, str],
                      allowed: dict) -> list[str]:
    return [f"{lesson}: the exercise's {name} is exported by {exports[name]}"
            for lesson, names in sorted(exercises.items()) for name in sorted(names)
            if name in exports and (lesson, name) not in allowed]


def lesson_helpers(sources: dict[str, str], face: dict[str, str]) -> dict[str, list]:
    """Per lesson, every public function and class of the lab modules its cells import."""
    modules: dict[str, set[str]] = {}
    for where, text in sources.items():
        for node in ast.walk(ast.parse(cell_code(text), where)):
            if isinstance(node, ast.ImportFrom) and node.module == "course_utils":
                modules.setdefault(where.split("/")[0], set()).update(
                    face[alias.name] for alias in node.names
                    if face.get(alias.name, "").startswith("course_utils.lab."))
    helpers = {}
    for lesson, names in modules.items():
        found = {}
        for name in sorted(names):
            module = importlib.import_module(name)
            for attr, value in vars(module).items():
                if not attr.startswith("_") and callable(value) and \
                        getattr(value, "__module__", "").startswith(name):
                    found[f"{value.__module__}.{value.__qualname__}"] = value
        helpers[lesson] = sorted(found.items())
    return helpers


def full_marks(check, answer) -> bool:
    inputs = json.loads(json.dumps(check.make_inputs(0, False)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a helper called as an answer may warn: not the point
        observations = run_probe(check.probe, (answer,), inputs)
        return check.evaluate(inputs, observations, False).fraction == 1


def helpers_answering(checks_by_lesson: dict[str, list], helpers: dict[str, list],
                      allowed: dict) -> list[str]:
    """(lesson, check, helper) where the helper, given as the answer, takes full marks."""
    return [f"{lesson}: {helper_name} takes full marks in {check.name}"
            for lesson, lesson_checks in sorted(checks_by_lesson.items())
            for check in lesson_checks
            for helper_name, helper in helpers.get(lesson, [])
            if (lesson, check.name, helper_name) not in allowed and full_marks(check, helper)]


def one_answer_checks() -> dict[str, list]:
    """Per lesson folder, its registered checks that take one answer."""
    folders = {path.name[:2]: path.name for path in (ROOT / "solutions").iterdir()
               if path.is_dir()}
    found: dict[str, list] = {}
    for check in REGISTRY.values():
        if len(inspect.signature(check.probe).parameters) == 2:  # (answer, inputs)
            lesson = folders[check.verify.__module__.split(".")[2].removeprefix("lesson")]
            found.setdefault(lesson, []).append(check)
    return found


def solution_cell_ids() -> set[str]:
    cells = set()
    for path in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code" and cell["metadata"].get("nbgrader", {}).get(
                    "solution"):
                cells.add(f"{path.parent.name}/{path.name}#{cell['id']}")
    return cells


def test_lab_exports_no_name_an_exercise_asks_for():
    problems = names_lab_answers(exercise_names(lesson_sources(), solution_cell_ids()),
                                 lab_exports(), ALLOWED)
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_no_lab_helper_of_a_lesson_passes_its_exercises_checks():
    problems = helpers_answering(one_answer_checks(), lesson_helpers(lesson_sources(),
                                                                     face_names()), ALLOWED)
    assert not problems, "\n".join(problems)


def test_every_allowed_pair_is_still_needed_and_has_a_reason():
    exports = lab_exports()
    for pair, reason in ALLOWED.items():
        assert len(reason) > 20, f"{pair} needs a reason"
        if len(pair) == 2:
            assert pair[1] in exports, f"{pair} is allowed but lab/ no longer exports it"
        else:
            module, _, name = pair[2].rpartition(".")
            helper = getattr(importlib.import_module(module), name)
            assert full_marks(REGISTRY[pair[1]], helper), f"{pair} no longer passes: remove it"


# ------------------------------------------------------------------ the test of the test

def test_a_lab_export_named_as_an_exercise_is_reported():
    sources = {"04_input_pipeline/x.ipynb#ex": "def find_bottleneck(loader, step, device):\n"
                                               "    pass\n",
               "07_multi_gpu/x.ipynb#script": "%%writefile s.py\ndef main():\n    pass\n"}
    exercises = exercise_names(sources, set(sources))
    assert exercises == {"04_input_pipeline": {"find_bottleneck"}}
    assert names_lab_answers(exercises, {"find_bottleneck": "course_utils.lab.pipeline",
                                         "main": "course_utils.lab.x"}, {}) == [
        ("04_input_pipeline: the exercise's find_bottleneck is exported by "
        "course_utils.lab.pipeline")]


def test_a_lab_helper_that_answers_an_exercise_is_reported():
    """Lesson 04's model answers, planted as lab helpers, take full marks: reported."""
    answer = solution("04_input_pipeline", "find_bottleneck")
    batches = solution("04_input_pipeline", "device_batches", "DeviceBatches")
    checks = {"04_input_pipeline": [REGISTRY["check_find_bottleneck"],
                                    REGISTRY["check_device_batches"]]}
    helpers = {"04_input_pipeline": [("course_utils.lab.pipeline.time_stages", answer),
                                     ("course_utils.lab.data.Batches", batches),
                                     ("course_utils.lab.timing.benchmark", print)]}
    assert helpers_answering(checks, helpers, {}) == [
        ("04_input_pipeline: course_utils.lab.pipeline.time_stages takes full marks in "
        "check_find_bottleneck"),
        ("04_input_pipeline: course_utils.lab.data.Batches takes full marks in "
        "check_device_batches")]
