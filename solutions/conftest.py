"""Lesson runs under nbval: a cell that writes to stderr fails, unless it means to; each lesson
is timed against the minute its text promises.

A learner reads stderr as an error (JupyterLab shows it red). A cell whose point is an error
printed by another process (a worker's traceback) carries the tag ``stderr-expected``; a cell
tagged ``raises-exception`` shows its error anyway. Everything else must keep stderr empty:
warnings it did not mean to print, tracebacks from garbage collected in a child process, a
library's log lines.
"""
from __future__ import annotations

import os
import time

import pytest

STDERR_EXPECTED = "stderr-expected"


def pytest_configure(config):
    """Start nbval's kernels without PYTEST_CURRENT_TEST in their environment.

    ipykernel forwards what the kernel's child processes (DataLoader workers, compiled
    libraries) write to file descriptors 1 and 2 into the notebook, as JupyterLab shows it,
    except when that variable says it runs under pytest. Without it, a lesson run here shows
    what a learner sees.
    """
    from nbval import kernel

    start_new_kernel = kernel.start_new_kernel

    def start_as_a_learner_would(**kwargs):
        env = {name: value for name, value in os.environ.items()
               if name != "PYTEST_CURRENT_TEST"}
        return start_new_kernel(env=env, **kwargs)

    kernel.start_new_kernel = start_as_a_learner_would


def unexpected_stderr(item) -> str:
    """What the nbval cell ``item`` wrote to stderr without meaning to ('' when nothing)."""
    outputs = getattr(item, "test_outputs", None)
    cell = getattr(item, "cell", None)
    if outputs is None or cell is None:
        return ""
    tags = cell.get("metadata", {}).get("tags", [])
    if STDERR_EXPECTED in tags or "raises-exception" in tags:
        return ""
    return "".join(out.get("text", "") for out in outputs
                   if out.get("output_type") == "stream" and out.get("name") == "stderr")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    started = time.perf_counter()
    result = yield
    if getattr(item, "cell", None) is None:
        return result
    total = lesson_seconds(item, time.perf_counter() - started)
    stderr = unexpected_stderr(item)
    if stderr.strip():
        pytest.fail(f"{item.name} wrote to stderr, which a learner reads as an error (tag the cell "
                    f"'{STDERR_EXPECTED}' if it means to):\n{stderr[:3000]}", pytrace=False)
    if item.nodeid in _last_cells_of_claiming_lessons and total > LIMIT_SECONDS:
        pytest.fail(f"{item.path.name}'s cells took {total:.0f} s to run; its text promises a "
                    f"learner that it runs {CLAIM}", pytrace=False)
    return result


# ------------------------------------------------------------------ how long a lesson takes

# Some lessons say they run "in under a minute" on a laptop CPU. The suite measures every lesson:
# the seconds its cells took to execute (kernel start excluded), reported at the end of the run.
# A lesson that makes the claim and takes over three times as long (a loaded CI machine is slower
# than a learner's idle laptop, but not that much) fails its last cell.
CLAIM = "under a minute"
CLAIMED_SECONDS = 60
LIMIT_SECONDS = 3 * CLAIMED_SECONDS
_lesson_seconds: dict[str, float] = {}
_last_cells_of_claiming_lessons: set[str] = set()


def pytest_collection_modifyitems(session, config, items):
    last = {}
    for item in items:
        if getattr(item, "cell", None) is not None:
            last[item.path] = item
    for item in last.values():
        text = " ".join(cell.get("source", "") for cell in item.parent.nb.cells)
        if CLAIM in " ".join(text.split()):
            _last_cells_of_claiming_lessons.add(item.nodeid)


def lesson_seconds(item, seconds: float) -> float:
    """Add one cell's ``seconds`` to its lesson's total; return the total so far."""
    lesson = str(item.path.relative_to(item.config.rootpath))
    _lesson_seconds[lesson] = _lesson_seconds.get(lesson, 0.0) + seconds
    return _lesson_seconds[lesson]


def pytest_terminal_summary(terminalreporter):
    if _lesson_seconds:
        terminalreporter.section("lesson run times (cells executed, kernel start excluded)")
        for lesson, seconds in sorted(_lesson_seconds.items()):
            terminalreporter.write_line(f"{seconds:6.1f} s  {lesson}")
