"""Hostile and broken submissions of lesson 00, each with the grade it deserves.

Lesson 00 has two autograded exercises (test_pick_device, test_gpu_inventory: 2 points
each) and one written answer graded by hand. Every case starts from the instructor's
solution (an honest, correct submission) and changes it.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Callable

import nbformat

LESSON = "00_setup"
NOTEBOOK = "setup.ipynb"

WRONG_PICK = ("def pick_device():\n"
              "    if torch.cuda.is_available():\n"
              "        device = torch.device('cuda')\n"
              "    return device\n")
WRONG_INVENTORY = ("def gpu_inventory():\n"
                   "    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]\n")
CHEAT_MARKER = "print('✔ pick_device() picks CUDA, then MPS, then the CPU.')"


@dataclass(frozen=True)
class Case:
    student: str
    what: str
    build: Callable[[nbformat.NotebookNode], object]  # returns a notebook, or bytes/str
    score: float
    status: str
    reason: str = ""  # a substring of the row's reason, or of a cell message


def _index(nb, grade_id):
    return next(i for i, c in enumerate(nb.cells)
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _with(nb, grade_id, source):
    nb = copy.deepcopy(nb)
    nb.cells[_index(nb, grade_id)].source = source
    return nb


def _before(nb, grade_id, source):
    nb = copy.deepcopy(nb)
    nb.cells.insert(_index(nb, grade_id), nbformat.v4.new_code_cell(source))
    return nb


def _wrong_pick(nb):
    return _with(nb, "pick_device", WRONG_PICK)


def _unsolved(nb):
    """Both exercises wrong: what a hostile submission has to work with."""
    return _with(_wrong_pick(nb), "gpu_inventory", WRONG_INVENTORY)


def _hack(source):
    """The unsolved notebook with ``source`` run before the first exercise."""
    return lambda nb: _before(_unsolved(nb), "pick_device", source)


def _metadata(nb, target, **changes):
    nb = copy.deepcopy(nb)
    nb.cells[_index(nb, target)].metadata.nbgrader.update(changes)
    return nb


def _delete(nb, grade_id):
    nb = copy.deepcopy(nb)
    del nb.cells[_index(nb, grade_id)]
    return nb


def _duplicate(nb, grade_id):
    nb = copy.deepcopy(nb)
    index = _index(nb, grade_id)
    twin = copy.deepcopy(nb.cells[index])
    twin.id = "twin"
    nb.cells.insert(index, twin)
    return nb


INPUT_TRANSFORMER = (
    "def _neutralise(lines):\n"
    "    return ['pass\\n'] if any('check' in line for line in lines) else lines\n"
    "get_ipython().input_transformers_cleanup.append(_neutralise)\n")

PATCH_CHECKS = (
    "from course_utils import checks\n"
    "from course_utils.checks import _core\n"
    "for _name in list(_core.REGISTRY):\n"
    "    setattr(checks, _name, lambda *a, **k: print('✔ passed'))\n"
    "_core.Check.__call__ = lambda self, *a, **k: None\n"
    "_core.fail = lambda *a, **k: None\n")

PATCH_TORCH = (
    "import torch\n"
    "torch.cuda.is_available = lambda: True\n"
    "torch.cuda.device_count = lambda: 2\n"
    "torch.accelerator.current_accelerator = lambda *a, **k: torch.device('cuda')\n")

FORGE_PROBE_JSON = (
    "import builtins, json\n"
    "_real_dumps, _real_print = json.dumps, builtins.print\n"
    "FAKE = {'results': [\n"
    "    {'type': 'device', 'device_type': 'cuda', 'index': None, 'text': 'cuda'},\n"
    "    {'type': 'device', 'device_type': 'cpu', 'index': None, 'text': 'cpu'}]}\n"
    "def _forged(obj, *args, **kwargs):\n"
    "    if isinstance(obj, dict) and 'results' in obj:\n"
    "        return _real_dumps(FAKE)\n"
    "    return _real_dumps(obj, *args, **kwargs)\n"
    "json.dumps = _forged\n"
    "builtins.print = lambda *a, **k: _real_print('✔ all checks passed')\n")

READ_SOLUTIONS = (
    "import pathlib, json, course_utils\n"
    "root = pathlib.Path(course_utils.__file__).resolve().parents[1]\n"
    "source = json.loads((root / 'solutions' / '00_setup' / 'setup.ipynb').read_text())\n"
    "for cell in source['cells']:\n"
    "    if cell.get('metadata', {}).get('nbgrader', {}).get('solution'):\n"
    "        exec(''.join(cell['source']))\n")

GRADEBOOK_TAMPER = (
    "import glob, os, sqlite3\n"
    "for path in glob.glob('/tmp/**/gradebook.db', recursive=True):\n"
    "    with sqlite3.connect(path) as db:\n"
    "        db.execute('update grade set auto_score = 100')\n")

HARDCODED_VISIBLE = (
    "_answers = iter([torch.device('cuda'), torch.device('cpu')])\n"
    "def pick_device():\n"
    "    return next(_answers)\n")

SIGINT_PROOF_LOOP = (
    "import signal\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "while True:\n"
    "    pass\n")

MEMORY_BOMB = (
    "try:\n"
    "    hog = bytearray(64 * 2**30)\n"
    "except MemoryError:\n"
    "    print('the memory cap stopped the bomb')\n")

OUTPUT_FLOOD = "print('x' * 5_000_000)\n"

CASES = [
    Case("honest", "the instructor's solution", lambda nb: nb, 4, "graded"),
    Case("unsolved", "both answers wrong, no tricks", _unsolved, 0, "graded", "UnboundLocalError"),
    Case("input-transformer", "rewrites the restored test cells to `pass`",
         _hack(INPUT_TRANSFORMER), 0, "graded", "UnboundLocalError"),
    Case("patch-checks", "replaces the checkers with functions that always pass",
         _hack(PATCH_CHECKS), 0, "graded", "raised UnboundLocalError"),
    Case("patch-torch", "fakes CUDA availability and always answers cuda",
         _hack(PATCH_TORCH), 0, "graded"),
    Case("forge-probe-json", "patches json.dumps and print to forge the checks' data",
         _hack(FORGE_PROBE_JSON), 0, "graded"),
    Case("fake-success", "prints the success line instead of solving",
         lambda nb: _with(_unsolved(nb), "pick_device", "def pick_device():\n    " + CHEAT_MARKER),
         0, "graded", "returned None"),
    Case("read-solutions", "executes the instructor's solution cells read from disk",
         _hack(READ_SOLUTIONS), 0, "graded", "pick_device"),
    Case("write-gradebook", "sets every score in the gradebook to 100",
         _hack(GRADEBOOK_TAMPER), 0, "graded"),
    Case("hardcoded-visible", "returns the visible check's expected answers in order",
         lambda nb: _with(_unsolved(nb), "pick_device", HARDCODED_VISIBLE), 0, "graded",
         "Hidden test"),
    Case("os-exit-first", "kills its kernel before any exercise",
         lambda nb: _before(nb, "pick_device", "import os\nos._exit(0)\n"), 0, "kernel-died",
         "kernel died"),
    Case("os-exit-later", "kills its kernel after the first exercise: credit kept",
         lambda nb: _before(nb, "gpu_inventory", "import os\nos._exit(1)\n"), 2, "kernel-died",
         "kernel died"),
    Case("memory-bomb", "asks for 64 GiB, then solves everything",
         lambda nb: _before(nb, "pick_device", MEMORY_BOMB), 4, "graded"),
    Case("sigint-proof-loop", "spins forever, ignoring SIGINT",
         lambda nb: _before(nb, "gpu_inventory", SIGINT_PROOF_LOOP), 2, "timeout", "time limit"),
    Case("output-flood", "prints 5 MB",
         lambda nb: _before(nb, "pick_device", OUTPUT_FLOOD), 0, "output-limit", "more than"),
    Case("deleted-test", "deletes a test cell",
         lambda nb: _delete(nb, "test_gpu_inventory"), 2, "tampered", "missing"),
    Case("renamed-test", "renames a test cell's grade_id",
         lambda nb: _metadata(nb, "test_gpu_inventory", grade_id="mine"), 2, "tampered", "missing"),
    Case("edited-test", "edits a test cell to call nothing",
         lambda nb: _with(nb, "test_pick_device", '"""Checks nothing."""\n'), 2, "tampered",
         "was edited"),
    Case("changed-points", "gives a test cell 100 points",
         lambda nb: _metadata(nb, "test_pick_device", points=100), 2, "tampered", "metadata"),
    Case("unlocked-ungraded", "turns a test cell into an ordinary cell",
         lambda nb: _metadata(nb, "test_pick_device", grade=False, locked=False), 2, "tampered",
         "metadata"),
    Case("duplicated-test", "duplicates a test cell",
         lambda nb: _duplicate(nb, "test_pick_device"), 2, "tampered", "appears 2 times"),
    Case("corrupt-json", "a truncated file", lambda nb: nbformat.writes(nb)[:200], 0, "invalid",
         "not valid JSON"),
    Case("not-a-notebook", "a PNG renamed to .ipynb", lambda nb: b"\x89PNG\r\n\x1a\n\x00\xff",
         0, "invalid", "not"),
    Case("json-not-notebook", "valid JSON that is not a notebook",
         lambda nb: json.dumps({"hello": "world"}), 0, "invalid", "not a Jupyter notebook"),
    Case("nbformat-3", "an nbformat 3 notebook",
         lambda nb: json.dumps({"nbformat": 3, "nbformat_minor": 0, "metadata": {},
                                "worksheets": [], "cells": []}), 0, "invalid", "version 3"),
]


def write_case(case: Case, solution: nbformat.NotebookNode, folder) -> None:
    """Write SUBMISSIONS/<student>/00_setup/setup.ipynb for one case."""
    target = folder / case.student / LESSON / NOTEBOOK
    target.parent.mkdir(parents=True, exist_ok=True)
    built = case.build(copy.deepcopy(solution))
    if isinstance(built, bytes):
        target.write_bytes(built)
    elif isinstance(built, str):
        target.write_text(built)
    else:
        nbformat.write(built, target)
