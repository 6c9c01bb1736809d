"""nbgrader's Validate (the learner lab's button, `nbgrader validate`): the course's limits
reach it, and what it reports is the checks' messages, never a traceback of nbclient's
(nbgrader_config.py; the button itself is pressed in tests/test_browser_validate.py)."""
from __future__ import annotations

import nbformat
import pytest
from nbconvert.filters import strip_ansi
from nbgrader.apps import NbGrader
from nbgrader.preprocessors import Execute
from nbgrader.server_extensions.validate_assignment.handlers import ValidateAssignmentHandler
from nbgrader.validator import Validator

from course_utils import checks

from .conftest import ROOT

STOPPED = ("Validate stopped this cell after 300 s (a cell's limit in nbgrader_config.py). Run "
           "the cell in the notebook to see what it waits for, then validate again.")


def lab_config(monkeypatch):
    """The configuration the learner lab's Validate handler loads, by its own code: from
    Jupyter's config path and the server's working folder, the course's (`course lab` starts
    the lab there). The method uses nothing of its handler."""
    monkeypatch.chdir(ROOT)
    config = ValidateAssignmentHandler.load_config(None)
    NbGrader.clear_instance()
    return config


def test_the_lab_and_the_command_read_the_courses_limits(monkeypatch):
    """Checks Validate's executor gets the course's limits instead of nbgrader's 30 s a cell
    and 4 s for late output, after which a whole run ended in a CellTimeoutError traceback."""
    config = lab_config(monkeypatch)
    executor = Execute(parent=Validator(config=config))
    assert executor.timeout >= 300
    assert executor.iopub_timeout >= 60 and executor.raise_on_iopub_timeout is False
    assert executor.interrupt_on_timeout is True  # a cell past its limit fails alone
    assert "Validate stopped this cell" in executor.error_on_timeout["traceback"][0]


def grade_cell(source: str, grade_id: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": grade_id, "locked": True,
                                 "points": 1, "schema_version": 3, "solution": False}
    return cell


@pytest.mark.slow
def test_a_cell_past_its_limit_fails_with_one_line_and_the_rest_is_validated(monkeypatch,
                                                                              tmp_path):
    """Checks a check cell that runs too long is reported with the course's line, not a
    traceback, and that a later check's message is still reported."""
    config = lab_config(monkeypatch)
    config.Execute.timeout = 3
    nb = nbformat.v4.new_notebook(cells=[
        grade_cell("import time\ntime.sleep(60)", "slow"),
        grade_cell("answer(2)", "undefined"),
        grade_cell("from course_utils.checks.framework import fail\n"
                   "fail('answer() returned 3, not 4.', 'add one.')", "wrong")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, tmp_path / "lesson.ipynb")
    results = Validator(config=config).validate(str(tmp_path / "lesson.ipynb"))
    slow, undefined, wrong = (strip_ansi(cell["raw_error"]) for cell in results["failed"])
    assert [line for line in slow.splitlines() if line] == ["KeyboardInterrupt", STOPPED]
    assert undefined.strip() == "NameError: name 'answer' is not defined"
    assert wrong == "✘ Check failed\nanswer() returned 3, not 4.\n" \
                    "How to fix it: add one."


def test_a_failure_is_wrapped_to_validates_lines_only_while_validating():
    """Checks each line of a long message fits nbgrader validate's 87 columns (4 of indent),
    words whole, and that the notebook shows the message unwrapped."""
    message = ("to_device() is not implemented yet (it raises NotImplementedError). " * 3
               + "\nHow to fix it: replace `raise NotImplementedError()` with your code.")
    wrapped = checks.failure_text(message, validating=True)
    lines = wrapped.splitlines()[1:]
    assert all(4 + len(line) <= 87 for line in lines) and len(lines) > 2
    assert " ".join(lines).split() == message.split()
    assert checks.failure_text(message, validating=False).endswith(message)
