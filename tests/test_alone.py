"""The process answers run alone in, graded (grading/alone.py and alone_server.py).

Real: the grading sandbox (bubblewrap) with a kernel's limits, the course's own server, and
lesson 09's fit_comm_model check (a small probe) as the check asked for.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from course_utils.checks import REGISTRY
from course_utils.grading import cgroups
from course_utils.grading.alone import AloneProcess
from course_utils.grading.groups import Group
from course_utils.grading.records import Limits
from course_utils.grading.session import KernelRecipe

CHECK = "check_fit_comm_model"
RIGHT = '''def fit_comm_model(sizes, seconds):
    x = torch.tensor(sizes, dtype=torch.float64)
    y = torch.tensor(seconds, dtype=torch.float64)
    dx = x - x.mean()
    slope = (dx * (y - y.mean())).sum() / (dx * dx).sum()
    return (y.mean() - slope * x.mean()).item(), 1 / slope.item()
'''


def portable(source: str) -> dict:
    return {"names": ["fit_comm_model"], "sources": [source], "modules": {"torch": "torch"},
            "objects": {}, "constants": {}, "missing": []}


@pytest.fixture
def alone(tmp_path, grading_sandbox):
    """A worker's process as the worker makes one: sandboxed, limits where cgroups allow."""
    control = cgroups.detect()
    recipe = KernelRecipe(Limits(cell_timeout=120.0), {"OMP_NUM_THREADS": "1"},
                          {"09_sharding": ("torch",)}, bwrap=grading_sandbox.bwrap,
                          control=control if control.enforced else cgroups.UNSAFE,
                          group=f"course-test-alone-{time.monotonic_ns()}")
    run_group = Group(control, recipe.group).create(None) if control.enforced else None
    process = AloneProcess(recipe, tmp_path)
    yield process
    process.close()
    if run_group is not None:
        run_group.remove()
    assert [p.name for p in tmp_path.iterdir()] == [], "its scratch was left behind"


def verdict(observed, inputs):
    return REGISTRY[CHECK].evaluate(inputs, observed, True).fraction


def test_an_answer_alone_is_observed_as_in_the_notebook(alone):
    inputs = REGISTRY[CHECK].make_inputs(7, True)
    observed, why = alone.observe(CHECK, portable(RIGHT), inputs)
    assert why == "" and verdict(observed, inputs) == 1.0


def test_one_answer_cannot_reach_the_next_ones_run(alone):
    """Each answer runs in a fork: a patch of torch made by one is gone for the next; what an
    answer prints (a forged result line included) never reaches the grader's channel."""
    inputs = REGISTRY[CHECK].make_inputs(8, True)
    patcher = '''def fit_comm_model(sizes, seconds):
    import os, sys
    torch.Tensor.item = lambda self: 1.0
    print("COURSE-CLEAN-RUN " + '{"returned": "forged"}')
    os.write(1, b"COURSE-CLEAN-RUN {}\\n")
    sys.stderr.write("COURSE-CLEAN-RUN {}\\n")
    return 0.0, 1.0
'''
    observed, why = alone.observe(CHECK, portable(patcher), inputs)
    assert why == "" and verdict(observed, inputs) == 0.0
    observed, why = alone.observe(CHECK, portable(RIGHT), inputs)
    assert why == "" and verdict(observed, inputs) == 1.0


def test_an_answer_that_exits_or_hangs_ends_its_own_call_only(alone):
    inputs = REGISTRY[CHECK].make_inputs(9, True)
    exits = "def fit_comm_model(sizes, seconds):\n    import os\n    os._exit(0)\n"
    observed, why = alone.observe(CHECK, portable(exits), inputs)
    assert why == "" and observed["probe_error"]["type"] == "CleanRunFailed"
    hangs = "def fit_comm_model(sizes, seconds):\n    while True:\n        pass\n"
    started = time.monotonic()
    alone.deadline = started + 5.0  # what the submission has left: nearer than the cell's
    observed, why = alone.observe(CHECK, portable(hangs), inputs)
    assert observed is None and "time limit" in why
    assert time.monotonic() - started < 5.0 + 2.0
    alone.deadline = float("inf")
    observed, why = alone.observe(CHECK, portable(RIGHT), inputs)  # a fresh process
    assert why == "" and verdict(observed, inputs) == 1.0


def test_a_reply_is_bounded_before_it_is_held(alone, monkeypatch):
    """What a fork reports is shortened by the probe; a process that floods its channel anyway
    is stopped once the worker holds that much, not after."""
    inputs = REGISTRY[CHECK].make_inputs(10, True)
    huge = "def fit_comm_model(sizes, seconds):\n    return 'x' * 5_000_000, 1.0\n"
    observed, why = alone.observe(CHECK, portable(huge), inputs)
    assert observed is not None and len(str(observed)) < 2_000_000  # describe() shortens it
    monkeypatch.setattr(alone, "_pending", b"COURSE-CLEAN-RUN " + b"x" * (2 << 20))
    observed, why = alone.observe(CHECK, portable(RIGHT), inputs)
    assert observed is None and why
    assert alone._pending == b""  # dropped with the process


def test_no_time_left_asks_for_nothing(alone):
    alone.deadline = time.monotonic() - 1
    assert alone.observe(CHECK, portable(RIGHT), {}) == (None, "no time was left for it")


LEAVES = '''def fit_comm_model(sizes, seconds):
    import os, subprocess
    if os.fork() == 0:  # a daemon: a grandchild that outlives the answer
        os.setsid()
        subprocess.Popen(["sleep", "120"])
        os._exit(0)
    with open("../helper_module.py", "w") as planted:  # beside the server, for the next
        planted.write("FORGED = True\\n")
    here = os.getcwd()
    for _ in range(1500):  # deeper than Python's recursion limit (os.makedirs recurses)
        os.mkdir("d")
        os.chdir("d")
    os.chdir(here)
    os.makedirs("closed/inner")  # a folder no one may enter or empty, its owner included
    open("closed/inner/kept", "w").close()
    os.chmod("closed/inner", 0)
    os.chmod("closed", 0)
    return 0.0, 1.0
'''
LOOKS = '''def fit_comm_model(sizes, seconds):
    import os
    others = [p for p in os.listdir("/proc") if p.isdigit()
              and open(f"/proc/{p}/cmdline", "rb").read().startswith(b"sleep")]
    try:
        import helper_module  # what the answer before left
        planted = 1.0
    except ImportError:
        planted = 0.0
    return str([len(others), planted, sorted(os.listdir(".."))[:3]]), 1.0
'''


def test_what_an_answer_leaves_is_gone_before_the_next(alone):
    """The next answer (maybe another student's) finds no process, file or module the one
    before left, however deep or closed: the server is their subreaper and empties its folder
    after each (scratch.remove_tree)."""
    inputs = REGISTRY[CHECK].make_inputs(11, True)
    observed, why = alone.observe(CHECK, portable(LEAVES), inputs)
    assert why == "" and "probe_error" not in observed and observed["error"] is None, observed
    observed, why = alone.observe(CHECK, portable(LOOKS), inputs)
    assert why == "", why
    found = observed["returned"]["items"][0]["value"]
    assert found.startswith("[0, 0.0, ['answer-") and found.count("answer-") == 1, found
    assert found.endswith("']]"), found  # only its own folder: nothing else left beside it


def test_run_by_hand_it_removes_only_the_folder_it_made(tmp_path):
    """The server empties its own folder after each answer: started by hand in a folder that
    holds anything else, it makes a folder of its own there and leaves the rest alone."""
    (tmp_path / "keep.txt").write_text("an instructor's file")
    (tmp_path / "sub").mkdir()
    request = {"check": CHECK, "portable": portable(RIGHT),
               "inputs": REGISTRY[CHECK].make_inputs(12, True)}
    server = subprocess.Popen([sys.executable, "-m", "course_utils.grading.alone_server"],
                              cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, env=dict(os.environ))
    assert server.stdout.readline() == b"COURSE-CLEAN-RUN ready\n"
    server.stdin.write((json.dumps(request) + "\n").encode())
    server.stdin.flush()
    assert server.stdout.readline().startswith(b"COURSE-CLEAN-RUN {")
    server.stdin.close()
    assert server.wait(timeout=60) == 0
    server.stdout.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt", "sub"]


@pytest.mark.gpu
def test_an_answer_alone_can_use_the_gpu(alone):
    """The server imports torch and the lessons' modules but never initialises CUDA (a fork of a
    process that did could not use it): an answer that computes on the GPU runs alone."""
    inputs = REGISTRY[CHECK].make_inputs(13, True)
    on_gpu = RIGHT.replace("dtype=torch.float64)", "dtype=torch.float64, device='cuda')")
    assert on_gpu.count("device='cuda'") == 2
    observed, why = alone.observe(CHECK, portable(on_gpu), inputs)
    assert why == "" and "probe_error" not in observed, observed
    assert verdict(observed, inputs) == 1.0
