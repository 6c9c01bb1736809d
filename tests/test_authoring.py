"""Every lesson follows docs/authoring.md, so the grader can read its tests as data."""
from __future__ import annotations

import ast
import json

import nbformat
import pytest

from course_utils.checks import REGISTRY
from course_utils.grading.testcells import InvalidTestCell, parse_test_cell
from course_utils.tools import hosted

from .conftest import ROOT
from .probe_roundtrip import probe_as_grader

SOURCES = sorted(ROOT.glob("solutions/*/*.ipynb"))


def graded_cells(path):
    nb = nbformat.read(path, as_version=4)
    return [cell for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("grade")]


def imported_modules(source: str) -> list[str]:
    """The modules a cell imports, in order (``from a.b import c`` gives ``a.b``)."""
    modules = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules.append(node.module)
    return modules


def course_helpers_come_first(source: str) -> bool:
    """Whether no torch module is imported before the first ``course_utils`` one."""
    modules = [m.split(".")[0] for m in imported_modules(source)]
    return "course_utils" in modules and "torch" not in modules[:modules.index("course_utils")]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.parent.name)
def test_first_cell_imports_the_course_helpers_before_torch(path):
    """Checks each lesson imports course_utils before torch's modules (docs/authoring.md).

    Its filter must be in place before torch.utils.cpp_extension is first imported, or PyPI's
    CUDA build without a GPU logs "No CUDA runtime is found" into the first cell's stderr.
    """
    first = next(c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"
                 and c.metadata.get("nbgrader", {}).get("grade_id") != hosted.CELL_ID)
    assert course_helpers_come_first(first.source), (
        f"{path.name}: move the `from course_utils import ...` lines above torch's imports")


def test_course_helpers_come_first_can_fail():
    """Checks the order test rejects torch's utilities imported before the course's helpers."""
    assert not course_helpers_come_first(
        "import time\n\nfrom torch.utils import benchmark\n\nfrom course_utils import timing")
    assert not course_helpers_come_first("import torch")
    assert course_helpers_come_first("import time\nfrom course_utils import timing\nimport torch")


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.parent.name)
def test_lesson_has_autograded_and_written_exercises(path):
    """Checks each lesson has at least two autograded tests and one written answer."""
    cells = graded_cells(path)
    auto = [c for c in cells if c.cell_type == "code" and not c.metadata.nbgrader.get("solution")]
    written = [c for c in cells if c.cell_type == "markdown"]
    assert len(auto) >= 2 and len(written) >= 1


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.parent.name)
def test_test_cells_call_registered_checks_with_hidden_part(path):
    """Checks every test cell is a docstring plus registered checks, hidden ones included."""
    ids = set()
    for cell in graded_cells(path):
        meta = cell.metadata.nbgrader
        assert meta["grade_id"] not in ids, f"duplicate grade_id {meta['grade_id']}"
        ids.add(meta["grade_id"])
        assert meta.get("points", 0) > 0
        if cell.cell_type != "code" or meta.get("solution"):
            continue
        assert meta.get("locked"), f"{meta['grade_id']} must be locked"
        docstring, calls = parse_test_cell(cell.source)
        assert "\n" not in docstring
        assert all(call.check_name in REGISTRY for call in calls)
        assert any(call.hidden for call in calls) and any(not call.hidden for call in calls)
        assert "### BEGIN HIDDEN TESTS" in cell.source


def test_parse_test_cell_rejects_ad_hoc_code():
    """Checks the parser refuses asserts, missing docstrings and non-name answers."""
    with pytest.raises(InvalidTestCell, match="docstring"):
        parse_test_cell("checks.check_pick_device(pick_device)")
    with pytest.raises(InvalidTestCell, match="may only call"):
        parse_test_cell('"""Doc."""\nassert pick_device() is not None')
    with pytest.raises(InvalidTestCell, match="by name"):
        parse_test_cell('"""Doc."""\nchecks.check_pick_device(lambda: 1)')


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_nonsense_answers_fail_with_a_message_as_the_grader_sends_the_probe(name):
    """Checks each probe runs as the grader sends it, and nonsense answers get a verdict, not a
    crash: the probe turns whatever the answer does into data, and verify fails it."""
    check = REGISTRY[name]
    for hidden, seed in ((False, 0), (True, 7)):
        inputs = json.loads(json.dumps(check.make_inputs(seed, hidden)))
        nonsense = (object(),) * check.n_answers
        verdict = check.evaluate(inputs, probe_as_grader(check, nonsense, inputs), hidden)
        assert not verdict.passed and verdict.fraction == 0
        assert "How to fix it:" in verdict.message


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_inputs_travel_as_json_fixed_when_visible_seeded_when_hidden(name):
    """Checks inputs survive JSON, ignore the seed when visible and follow it when hidden."""
    check = REGISTRY[name]
    for seed in (0, 1, 7, 42):
        hidden = check.make_inputs(seed, True)
        assert json.loads(json.dumps(hidden)) == hidden
        assert check.make_inputs(seed, True) == hidden
    assert check.make_inputs(0, False) == check.make_inputs(5, False)
