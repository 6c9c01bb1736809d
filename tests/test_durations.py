"""The suite's file order (tests/conftest.py) and the table it reads (scripts/test_durations.py)."""
from __future__ import annotations

import importlib.util
import json
from types import SimpleNamespace

from . import conftest
from .conftest import ROOT


def load_script():
    spec = importlib.util.spec_from_file_location("test_durations_script",
                                                  ROOT / "scripts" / "test_durations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_junit_report_becomes_seconds_per_file(tmp_path):
    """Checks setup, calls and teardown of a file add up, notebooks' cells included."""
    report = tmp_path / "report.xml"
    report.write_text(
        '<testsuites><testsuite>'
        '<testcase file="tests/test_a.py" classname="tests.test_a" name="one" time="1.5"/>'
        '<testcase file="tests/test_a.py" classname="tests.test_a" name="two" time="2.0"/>'
        '<testcase file="solutions/00_setup/setup.ipynb" classname="x" name="Cell 0" '
        'time="4.25"/></testsuite></testsuites>')
    assert load_script().file_seconds(report) == {"tests/test_a.py": 3.5,
                                                  "solutions/00_setup/setup.ipynb": 4.25}


def test_files_go_out_longest_first_tests_within_a_file_as_collected(monkeypatch, tmp_path):
    """Checks the measured order, an unmeasured file placed at the default, a file kept whole."""
    table = tmp_path / "durations.json"
    table.write_text(json.dumps({"tests/test_long.py": 300.0, "tests/test_short.py": 1.0}))
    monkeypatch.setattr(conftest, "DURATIONS", table)
    ids = ["tests/test_short.py::a", "tests/test_new.py::a", "tests/test_long.py::a",
           "tests/test_short.py::b", "tests/test_long.py::b"]
    items = [SimpleNamespace(nodeid=nodeid) for nodeid in ids]
    conftest.longest_first(items)
    assert [item.nodeid for item in items] == [
        "tests/test_long.py::a", "tests/test_long.py::b", "tests/test_new.py::a",
        "tests/test_short.py::a", "tests/test_short.py::b"]


def test_the_table_names_only_files_that_exist():
    """Checks tests/durations.json holds no file that was renamed or removed."""
    table = json.loads(conftest.DURATIONS.read_text()) if conftest.DURATIONS.is_file() else {}
    assert [name for name in table if not (ROOT / name).is_file()] == []
