"""Answers that reach into the probe's reach are graded and flagged `review` (review.py).

The forgeries of issue 28, as a learner would write them: a global that shadows a builtin the
probe expression calls by bare name, a function that walks its own closure or its caller's
frame to rewrite the probe's log, a patched ``torch._dynamo.explain`` hiding a graph break, a
patched course package, a rewired kernel message handler or result formatter (the kernel's
own machinery, which carries the probe in and its result out). Every solution notebook, as
the course gives it, is flagged for none.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from course_utils.grading.feedback import render
from course_utils.grading.records import ItemResult, NotebookResult, Status, SubmissionResult
from course_utils.grading.review import learner_code, review_reasons
from course_utils.grading.structure import load_lesson

ROOT = Path(__file__).resolve().parents[1]

FORGERIES = {
    "shadowed exec": ("def exec(program, ns):\n    ns['result'] = '{\"forged\": 1}'\n",
                      "rebinds the builtin `exec`"),
    "closure walk": (("def time_fn(fn, *args):\n"
                     "    log = fn.__closure__[0].cell_contents\n    log.clear()\n"),
                     "reads `__closure__`"),
    "caller's frame": (("import sys\ndef step(model):\n"
                       "    sys._getframe(1).f_locals['log'].append('all_reduce')\n"),
                       "reads `f_locals`"),
    "gc walk": ("import gc\nspies = [o for o in gc.get_objects() if type(o).__name__ == 'Spy']\n",
                "reads `get_objects`"),
    "patched explain": (("import torch\nimport torch._dynamo as dynamo\n"
                        "dynamo.explain = lambda fn: (lambda *a: None)\n"),
                        "patches `torch._dynamo.explain`"),
    "patched course": ("from course_utils import probe\nsetattr(probe, 'Spy', object)\n",
                       "patches `course_utils.probe` (setattr)"),
    "builtins": ("import builtins\nbuiltins.print = lambda *a: None\n",
                 "imports `builtins`"),
    # Measured graded on lesson 00: 2/2 for a wrong pick_device, the probe given another one.
    "rewired handler": (("k = get_ipython().kernel\nhandle = k.shell_handlers['execute_request']\n"
                         "def rewired(stream, idents, msg):\n"
                         "    msg['content']['user_expressions'] = {}\n"
                         "    return handle(stream, idents, msg)\n"
                         "k.shell_handlers['execute_request'] = rewired\n"),
                        "reaches `shell_handlers`"),
    "own process group": (("import torch.distributed as dist\n"
                           "def accumulation_step(ddp_model, micro_batches, loss_fn, opt):\n"
                           "    group = dist.ProcessGroupGloo(dist.HashStore(), 0, 1)\n"),
                          "builds a process group of its own (`ProcessGroupGloo`)"),
    "own process group, imported": ("from torch.distributed import ProcessGroupGloo as G\n",
                                    "builds a process group of its own"),
    # Spelled so that no name above appears: only the dynamic code itself is named.
    "code from a string": (("exec('import tor' + 'ch._dynamo as d; d.explain = None')\n"),
                           "runs code or imports built at run time (`exec`)"),
    "import built at run time": (("m = __import__('to' + 'rch._dynamo', fromlist=['x'])\n"
                                  "setattr(m, 'expl' + 'ain', None)\n"),
                                 "runs code or imports built at run time (`__import__`)"),
    "importlib": (("import importlib\ng = importlib.import_module('g' + 'c')\n"),
                  "runs code or imports built at run time (`import_module`)"),
    "the result channel": (("import os\nfor fd in range(3, 9):\n"
                            "    os.write(fd, b'COURSE-CLEAN-RUN {}\\n')\n"),
                           "calls `os.write`"),
    "another process's descriptors": ("open(f'/proc/{1}/fd/3', 'wb')\n",
                                      "(the processes' own files)"),
    "result formatter": (("formatter = get_ipython().display_formatter.formatters['text/plain']\n"
                          "formatter.for_type(str, lambda text, printer, cycle: None)\n"),
                         "reaches `display_formatter`"),
}


@pytest.mark.parametrize("name", FORGERIES)
def test_each_forgery_route_is_named(name):
    source, reason = FORGERIES[name]
    assert any(reason in found for found in review_reasons([source])), review_reasons([source])


def test_honest_code_is_not_flagged():
    """Checks what honest answers do: gc.collect(), cudnn.benchmark, a variable named `input`."""
    honest = ("import gc, torch, importlib\ngc.collect()\ntorch.backends.cudnn.benchmark = True\n"
              "model_eval = torch.nn.Linear(2, 2).eval()\nnp = importlib.import_module('numpy')\n"
              "input = torch.ones(2)\nmodel = torch.nn.Linear(2, 2)\nmodel.weight.data[0] = 1\n"
              "%timeit model(input)\n")
    assert review_reasons([honest, "%%time\nx = 1\n"]) == []


@pytest.mark.parametrize("lesson", sorted(p.name for p in (ROOT / "solutions").iterdir()
                                          if p.is_dir() and p.name[:2].isdigit()))
def test_no_solution_is_flagged(lesson):
    """Checks every lesson's solution, graded as a submission, has no code to review: its
    answers are scanned, the cells released as they are left out (lesson 05's demo reads a
    traceback's frame)."""
    for spec in load_lesson(ROOT, lesson).notebooks:
        nb = nbformat.read(ROOT / "solutions" / lesson / spec.filename, as_version=4)
        assert review_reasons(learner_code(nb, spec)) == []


def test_the_flag_reaches_the_feedback_page():
    item = ItemResult("a", 2.0, 2.0, "passed", "what")
    notebook = NotebookResult("setup", Status.GRADED, "", (item,), "reads `f_back`")
    page = render(SubmissionResult("s", "00_setup", (notebook,)))
    assert "Flagged for the instructor's review" in page and "f_back" in page
