"""Lesson runs under nbval: a cell that writes to stderr fails, unless it means to.

A learner reads stderr as an error (JupyterLab shows it red). A cell whose point is an error
printed by another process (a worker's traceback) carries the tag ``stderr-expected``; a cell
tagged ``raises-exception`` shows its error anyway. Everything else must keep stderr empty:
warnings it did not mean to print, tracebacks from garbage collected in a child process, a
library's log lines.
"""
from __future__ import annotations

import os

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
    result = yield
    stderr = unexpected_stderr(item)
    if stderr.strip():
        pytest.fail(f"{item.name} wrote to stderr, which a learner reads as an error (tag the cell "
                    f"'{STDERR_EXPECTED}' if it means to):\n{stderr[:3000]}", pytrace=False)
    return result
