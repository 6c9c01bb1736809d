"""Hostile and broken submissions of lesson 00, each with the grade it deserves.

Lesson 00 has two autograded exercises (test_pick_device, test_gpu_inventory: 2 points
each) and one written answer graded by hand. Every case starts from the instructor's
solution (an honest, correct submission) and changes it — its content, or how it lies on
disk (symbolic links, a renamed download).
"""
from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat

LESSON = "00_setup"
NOTEBOOK = "setup.ipynb"

WRONG_PICK = ("def pick_device():\n"
              "    if torch.cuda.is_available():\n"
              "        device = torch.device('cuda')\n"
              "    return device\n")
WRONG_INVENTORY = ("def gpu_inventory():\n"
                   "    return [torch.cuda.get_device_name(i)\n"
                   "            for i in range(torch.cuda.device_count())]\n")
CHEAT_MARKER = "print('✔ pick_device() picks CUDA, then MPS, then the CPU.')"


@dataclass(frozen=True)
class Case:
    student: str
    what: str
    build: Callable[[nbformat.NotebookNode], object]  # returns a notebook, or bytes/str
    score: float
    status: str
    reason: str = ""  # a substring of the row's reason, or of a cell message
    # Writes the case into SUBMISSIONS/<student>/ itself (links, renamed files): called with
    # (the built notebook, the student's folder, the course root).
    lay_out: Callable[[object, Path, Path], None] | None = None


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
    "from course_utils.checks import framework as _core\n"
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

# A global named `exec`: the probe expression once called `exec` by bare name, so this ran
# instead and graded right answers of its own in place of the submitted ones (4/4).
SHADOW_EXEC = (
    "_real_exec = exec\n"
    "def _right_pick():\n"
    "    if torch.cuda.is_available():\n"
    "        return torch.device('cuda')\n"
    "    if torch.backends.mps.is_available():\n"
    "        return torch.device('mps')\n"
    "    return torch.device('cpu')\n"
    "def _right_inventory():\n"
    "    return [{'index': i, 'name': p.name, 'memory_gib': p.total_memory / 2**30,\n"
    "             'capability': f'{p.major}.{p.minor}', 'sm_count': p.multi_processor_count}\n"
    "            for i, p in ((i, torch.cuda.get_device_properties(i))\n"
    "                         for i in range(torch.cuda.device_count()))]\n"
    "def exec(program, ns):\n"
    "    right = {'pick_device': _right_pick, 'gpu_inventory': _right_inventory}\n"
    "    ns['answers'] = tuple(right.get(getattr(a, '__name__', ''), a) for a in ns['answers'])\n"
    "    return _real_exec(program, ns)\n")

READ_SOLUTIONS = (
    "import pathlib, json, course_utils\n"
    "root = pathlib.Path(course_utils.__file__).resolve().parents[1]\n"
    "source = json.loads((root / 'solutions' / '00_setup' / 'setup.ipynb').read_text())\n"
    "for cell in source['cells']:\n"
    "    if cell.get('metadata', {}).get('nbgrader', {}).get('solution'):\n"
    "        exec(''.join(cell['source']))\n")

# Finds the gradebook from the command line of the `course grade` process it runs under
# (its own ancestors only: never another run on the machine) and installs a trigger that
# turns every score the grader writes afterwards — its own included — into 100. Without
# the sandbox this succeeds (tests/test_grading_resilience.py shows it); in the sandbox the
# grader's processes and files are out of sight.
GRADEBOOK_TAMPER = (
    "import os, pathlib, sqlite3, time\n"
    "def _ancestors():\n"
    "    pid = os.getppid()\n"
    "    while pid > 1:\n"
    "        yield pid\n"
    "        stat = pathlib.Path(f'/proc/{pid}/stat').read_text()\n"
    "        pid = int(stat.rsplit(')', 1)[1].split()[1])\n"
    "def _gradebooks():\n"
    "    for pid in _ancestors():\n"
    "        try:\n"
    "            args = pathlib.Path(f'/proc/{pid}/cmdline').read_bytes().split(b'\\0')\n"
    "            cwd = os.readlink(f'/proc/{pid}/cwd')\n"
    "        except OSError:\n"
    "            continue\n"
    "        if b'--out' in args:\n"
    "            yield pathlib.Path(cwd, args[args.index(b'--out') + 1].decode(), 'gradebook.db')\n"
    "installed, deadline = 0, time.time() + 60\n"
    "while not installed and time.time() < deadline:  # a slow grader may still be creating it\n"
    "    candidates = list(_gradebooks())\n"
    "    if not candidates:  # no grader in sight: the sandbox\n"
    "        break\n"
    "    for book in filter(pathlib.Path.exists, candidates):\n"
    "        try:\n"
    "            with sqlite3.connect(book, timeout=30) as db:\n"
    "                db.execute('CREATE TRIGGER IF NOT EXISTS full_marks AFTER UPDATE OF '\n"
    "                           'auto_score ON grade WHEN NEW.auto_score IS NOT 100 BEGIN '\n"
    "                           'UPDATE grade SET auto_score = 100 WHERE id = NEW.id; END')\n"
    "            installed += 1\n"
    "        except sqlite3.Error:  # its tables are not there yet\n"
    "            pass\n"
    "    time.sleep(0.2)\n"
    "print('gradebooks changed:', installed)\n")

# Appends a line to the installed course package, to the course root and to an installed
# third-party package; prints what happened to each. A line that landed would be imported
# by every later grading run.
MARKER = "# written by a graded submission: this line must never land"
WRITE_INSTALLATION = (
    "import pathlib, course_utils, torch\n"
    "package = pathlib.Path(course_utils.__file__).resolve().parent\n"
    "targets = [package / 'checks' / 'framework.py', package / '__init__.py',\n"
    "           package.parent / 'Makefile', package.parent / 'pyproject.toml',\n"
    "           pathlib.Path(torch.__file__)]\n"
    "for target in targets:\n"
    "    try:\n"
    "        with open(target, 'a') as handle:\n"
    f"            handle.write('\\n{MARKER}\\n')\n"
    "        print('WROTE', target)\n"
    "    except OSError as error:\n"
    "        print('refused', target.name, type(error).__name__)\n")
WRITE_TARGETS = 5

# Signals the grader: the parent of the kernel, then every process it may signal. Inside
# the sandbox the parent is the sandbox's own init (immune) and there is no one else.
KILL_PARENT = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"
KILL_EVERYTHING = (
    "import os, signal\n"
    "# Safety for the machine running the tests: outside a PID namespace (many processes\n"
    "# visible), die alone instead, so that the case fails loudly (kernel-died).\n"
    "if len([pid for pid in os.listdir('/proc') if pid.isdigit()]) > 3:\n"
    "    os._exit(3)\n"
    "os.kill(-1, signal.SIGKILL)\n")

DEEPLY_NESTED = '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": ' \
    + "[" * 300_000 + "]" * 300_000 + "}"

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
    Case("shadow-exec", "a global `exec` that runs the probe on right answers of its own",
         _hack(SHADOW_EXEC), 0, "graded", "UnboundLocalError"),
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
    # --- outside the kernel: the grader's processes, the installation, the file system
    Case("kill-parent", "SIGKILLs its kernel's parent, then solves everything",
         lambda nb: _before(nb, "gpu_inventory", KILL_PARENT), 4, "graded"),
    Case("kill-everything", "os.kill(-1, SIGKILL), then solves everything",
         lambda nb: _before(nb, "gpu_inventory", KILL_EVERYTHING), 4, "graded"),
    Case("write-installation", "appends to course_utils, the course root and torch",
         _hack(WRITE_INSTALLATION), 0, "graded"),
    Case("symlinked-notebook", "setup.ipynb is a link to the instructor's solution",
         lambda nb: nb, 0, "invalid", "is a symbolic link",
         lay_out=lambda nb, folder, root: _link(
             root / "solutions" / LESSON / NOTEBOOK, folder / LESSON / NOTEBOOK)),
    Case("symlinked-lesson", "the lesson folder is a link to the instructor's solutions",
         lambda nb: nb, 0, "invalid", "is a symbolic link",
         lay_out=lambda nb, folder, root: _link(root / "solutions" / LESSON, folder / LESSON)),
    Case("deeply-nested", "600 kB of nested JSON arrays", lambda nb: DEEPLY_NESTED, 0,
         "invalid", "nested too deeply"),
    Case("renamed-download", "the solution saved by a browser as 'setup (1).ipynb'",
         lambda nb: nb, 4, "graded", "graded 'setup (1).ipynb'",
         lay_out=lambda nb, folder, root: _write(nb, folder / LESSON / "setup (1).ipynb")),
    Case("two-renamed", "two renamed copies and a text file: which one is meant?",
         lambda nb: nb, 0, "missing", "found 'notes.txt', 'setup (1).ipynb', 'setup (2).ipynb'",
         lay_out=lambda nb, folder, root: _two_renamed(nb, folder / LESSON)),
]


def _two_renamed(nb, folder: Path) -> None:
    for name in ("setup (1).ipynb", "setup (2).ipynb"):
        _write(nb, folder / name)
    (folder / "notes.txt").write_text("my notes\n")


def _link(target: Path, link: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, link)


def _write(built, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(built, bytes):
        target.write_bytes(built)
    elif isinstance(built, str):
        target.write_text(built)
    else:
        nbformat.write(built, target)


def write_case(case: Case, solution: nbformat.NotebookNode, folder: Path, root: Path) -> None:
    """Write SUBMISSIONS/<student>/00_setup/ for one case."""
    built = case.build(copy.deepcopy(solution))
    if case.lay_out is not None:
        (folder / case.student).mkdir(parents=True, exist_ok=True)
        case.lay_out(built, folder / case.student, root)
    else:
        _write(built, folder / case.student / LESSON / NOTEBOOK)
