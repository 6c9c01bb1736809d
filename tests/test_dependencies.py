"""Which cells grading runs (grading/dependencies.py, grading/needed.py), on small notebooks.

Each notebook here is a lesson in miniature: imports, demonstration cells (the lesson's own,
unchanged), an answer cell and its test cell. Nothing is executed.
"""
from __future__ import annotations

import nbformat
import pytest

from course_utils.grading.dependencies import analyse_cell
from course_utils.grading.execution import CellsRun, needs_full_run
from course_utils.grading.needed import MAX_ANALYSED_CHARS, plan_cells
from course_utils.grading.records import ItemResult
from course_utils.grading.structure import GradeItem, LessonNotebook
from course_utils.grading.testcells import CheckCall

IMPORTS = "import os\nimport torch\nfrom course_utils import checks"
ANSWER = "def scale(x):\n    return torch.as_tensor(x) * factor"
TEST = '"""Checks scale()."""\nchecks.check_scale(scale)'


def notebook(*demos: str, answer: str = ANSWER, after: tuple[str, ...] = (),
             changed: tuple[str, ...] = ()):
    """(notebook, spec): IMPORTS, the demonstration cells, the answer, its test, then ``after``;
    ``changed`` are cells the student wrote (not among the lesson's own)."""
    cells = [nbformat.v4.new_code_cell(source) for source in (IMPORTS, *demos, *changed)]
    answer_cell = nbformat.v4.new_code_cell(answer)
    answer_cell.metadata["nbgrader"] = {"grade_id": "scale", "solution": True}
    test_cell = nbformat.v4.new_code_cell(TEST)
    test_cell.metadata["nbgrader"] = {"grade_id": "test_scale", "grade": True, "points": 1}
    cells += [answer_cell, test_cell, *(nbformat.v4.new_code_cell(s) for s in after)]
    item = GradeItem("test_scale", 1.0, True, "Checks scale().",
                     (CheckCall("check_scale", ("scale",), False),), TEST, TEST)
    spec = LessonNotebook("99_test", "test.ipynb", (item,), ("scale",),
                          lesson_cells=frozenset([IMPORTS, *demos, *after]))
    return nbformat.v4.new_notebook(cells=cells), spec


def ran(nb, spec) -> list[str]:
    """The sources of the cells the plan runs (test cells are checked, never run)."""
    plan = plan_cells(nb, spec)
    return [nb.cells[index].source for index in sorted(plan.run)]


def test_a_measurement_nothing_needs_is_skipped():
    """Checks a demo cell no graded cell reads is skipped; the answer's global is kept."""
    nb, spec = notebook("factor = 3", "timings = [torch.randn(9) for _ in range(3)]",
                        after=("print(timings)",))
    assert ran(nb, spec) == [IMPORTS, "factor = 3", ANSWER]
    assert plan_cells(nb, spec).skipped == {2, 5}


def test_an_answer_reusing_a_demo_variable_keeps_its_cell_and_what_it_needs():
    """Checks the cells defining what an answer's body reads run, transitively."""
    nb, spec = notebook("base = 2", "factor = base * 3", "unused = 1")
    assert ran(nb, spec) == [IMPORTS, "base = 2", "factor = base * 3", ANSWER]


def test_a_rebinding_between_answer_and_test_is_kept():
    """Checks a global the answer reads is looked up where the check calls it, not earlier."""
    nb, spec = notebook("factor = 3")
    nb.cells.insert(3, nbformat.v4.new_code_cell("factor = 5"))
    spec = LessonNotebook(spec.lesson, spec.filename, spec.items, spec.solution_cells,
                          lesson_cells=spec.lesson_cells | {"factor = 5"})
    assert "factor = 5" in ran(nb, spec)


def test_a_mutation_of_a_needed_name_is_kept_until_its_binding():
    """Checks attribute and item assignment, augmented assignment and method calls count as
    changes of a name; an earlier unconditional binding ends the search."""
    demos = ("factor = 1", "factor = {}", "factor['k'] = 2", "factor.update(a=1)",
             "factor |= {'b': 2}", "other = 0")
    nb, spec = notebook(*demos)
    assert ran(nb, spec) == [IMPORTS, *demos[1:5], ANSWER]


def test_a_conditional_binding_does_not_hide_an_earlier_one():
    """Checks a binding under `if` keeps the cell before it too."""
    nb, spec = notebook("factor = 1", "if os.environ.get('X'):\n    factor = 2")
    assert ran(nb, spec) == [IMPORTS, "factor = 1", "if os.environ.get('X'):\n    factor = 2",
                             ANSWER]


@pytest.mark.parametrize("setting", [
    "torch.set_float32_matmul_precision('high')", "torch.backends.cudnn.benchmark = True",
    "os.environ['COURSE_DEVICE'] = 'cpu'", "os.chdir('/tmp')", "import sys\nsys.path.append('x')",
])
def test_a_setting_changed_before_a_graded_cell_is_kept(setting):
    """Checks a cell changing what later code sees, without a name, runs."""
    nb, spec = notebook("factor = 3", setting)
    assert setting in ran(nb, spec)


def test_a_setting_set_back_or_changed_after_the_last_graded_cell_is_skipped():
    """Checks a setting restored in the same cell, or changed after every graded cell, does
    not keep its cell; nor do warning filters inside `warnings.catch_warnings()`."""
    restored = ("torch.set_float32_matmul_precision('high')\ntry:\n    pass\n"
                "finally:\n    torch.set_float32_matmul_precision('highest')")
    quiet = ("import warnings\nwith warnings.catch_warnings():\n"
             "    warnings.simplefilter('ignore')")
    nb, spec = notebook("factor = 3", restored, quiet,
                        after=("torch.set_float32_matmul_precision('high')",))
    assert ran(nb, spec) == [IMPORTS, "factor = 3", ANSWER]


def test_a_seed_is_kept_only_for_code_that_draws_numbers():
    """Checks a seed before only definitions is skipped (a check draws its own inputs), and
    kept before a kept cell that runs code."""
    seeded = "torch.manual_seed(0)\nwaste = torch.randn(3)"
    nb, spec = notebook("factor = 3", seeded)
    assert seeded not in ran(nb, spec)
    nb, spec = notebook(seeded, "factor = torch.randn(1)")
    assert seeded in ran(nb, spec)


def test_a_file_written_before_code_that_reads_it_is_kept():
    """Checks a cell writing a file runs when a kept cell after it runs code."""
    writer = "open('data.txt', 'w').write('3')"
    nb, spec = notebook(writer, "factor = int(open('data.txt').read())")
    assert writer in ran(nb, spec)


@pytest.mark.parametrize("opaque", ["!pip list", "files = !ls", "%run other.py", "exec('y = 1')",
                                    "from math import *", "x = globals()['factor']",
                                    "%%bash\necho hi"])
def test_an_opaque_cell_runs_with_every_cell_before_it(opaque):
    """Checks a cell whose reads cannot be known runs, and so does every cell before it."""
    nb, spec = notebook("unused = 1", after=(opaque,))
    nb.cells.insert(2, nb.cells.pop())  # before the answer
    assert ran(nb, spec)[:3] == [IMPORTS, "unused = 1", opaque]


def test_a_cell_the_student_wrote_or_changed_always_runs():
    """Checks cells not among the lesson's own run (nbgrader would run them), with what they
    need; a hostile cell that reads nothing is not skipped."""
    nb, spec = notebook("factor = 3", "slow = sum(range(10))",
                        changed=("import os\nos._exit(0)", "print(slow)"))
    assert ran(nb, spec) == [IMPORTS, "factor = 3", "slow = sum(range(10))",
                             "import os\nos._exit(0)", "print(slow)", ANSWER]


def test_code_too_large_or_too_deep_to_read_runs():
    """Checks a cell nested too deeply to parse is opaque, and a notebook with more code than
    any lesson is not read at all: every cell runs."""
    assert analyse_cell("x = " + "(" * 5000 + ")" * 5000, {}).opaque
    nb, spec = notebook("factor = 3", "padding = '" + "x" * MAX_ANALYSED_CHARS + "'")
    assert not plan_cells(nb, spec).skipped


def test_timeit_and_writefile_magics_are_read():
    """Checks %timeit reads its expression's names and %%writefile writes a file."""
    facts = analyse_cell("%timeit -n 10 -r 3 a @ b", {})
    assert facts.uses == {"a", "b"} and not facts.opaque and not facts.defines
    facts = analyse_cell("%%writefile {script}\nprint('hello')", {})
    assert facts.uses == {"script"} and facts.seeds_or_files


def test_scopes_leave_local_names_out():
    """Checks parameters, locals and comprehension variables are no reads of other cells."""
    facts = analyse_cell("def f(a):\n    b = a + c\n    return [i for i in b]\n"
                         "squares = [j * j for j in range(n)]", {})
    assert facts.deferred == {"c"} and facts.uses == {"range", "n"}
    assert facts.defines == {"f", "squares"}


def items(*messages: str) -> dict[str, ItemResult]:
    return {f"t{i}": ItemResult(f"t{i}", 1.0, 0.0, message) for i, message in enumerate(messages)}


@pytest.mark.parametrize("messages, errors, expected", [
    (["Hidden test failed: scale() raised NameError: name 'timings' is not defined."], [], True),
    ([], ["NameError: name 'timings' is not defined"], True),
    (["could not check scale: NameError: name 'scale' is not defined."], [], False),
    ([], ["AttributeError: 'Holder' object has no attribute 'k'"], True),
    ([], ["FileNotFoundError: data.txt"], True),
    (["scale() raised UnboundLocalError: cannot access local variable 'device'"], [], False),
    (["scale() is not implemented yet (it raises NotImplementedError)."], [], False),
    (["scale(2) returned 5, expected 6."], ["ValueError: bad"], False),
])
def test_the_full_run_follows_failures_skipping_can_cause(messages, errors, expected):
    """Checks which failures of a run that skipped cells send the notebook to a full run: a
    name only a skipped cell defines, a missing attribute or file; not the answer's own."""
    nb, spec = notebook("factor = 3", "timings = [1, 2]")
    plan = plan_cells(nb, spec)
    assert plan.skipped_names == {"timings"}
    run = CellsRun(decided=items(*messages), errors=errors, plan=plan)
    assert needs_full_run(run) is expected
    assert not needs_full_run(CellsRun(decided=items(*messages), errors=errors))
