"""The process answers run alone in, on the grader's side (alone_server.py, checks/clean_run.py).

One per grading worker, started in the background beside its first kernel and stopped with
the worker: ``python -m course_utils.grading.alone_server`` in the grading sandbox, with a
kernel's limits (its own cgroup inside the worker's, a tmpfs scratch of ``scratch_mb``), the
run's lessons' imports loaded once, then a fork per answer that leaves nothing behind
(alone_server.py says how). Starting it costs about what a kernel's start does; it is paid once
per worker, not per notebook. What comes back is bounded before it is held: one reply line of
at most ``clean_run.MAX_RESULT_BYTES``, read within the call's time (the cell's time limit and
the submission's deadline, whichever is nearer); a process that says more, says it late or
dies is stopped, and the next answer gets a fresh one.
"""
from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ..checks import clean_run
from . import alone_server, sandbox
from .groups import Group
from .outside import kernel_confinement
from .scratch import remove_tree
from .session import KernelRecipe

READY = b"ready"


class AloneProcess:
    """``observe(check, portable, inputs)`` for the answers a worker grades."""

    def __init__(self, recipe: KernelRecipe, scratch_root: Path):
        self.recipe, self.scratch_root = recipe, Path(scratch_root)
        # every lesson's imports, each once, in the order the lessons name them
        self.preload = tuple(dict.fromkeys(name for names in recipe.preload.values()
                                           for name in names))
        self.deadline = float("inf")  # the submission's, set for each call
        self._stack: contextlib.ExitStack | None = None
        self._running: sandbox.Running | None = None
        self._ready = False
        self._pending = b""

    def start_ahead(self) -> None:
        """Start it now, if it is not running, to load while kernels work (a start that fails
        is tried again, and reported, at the first answer)."""
        if self._running is None:
            with contextlib.suppress(Exception):
                self._start()

    def observe(self, check: str, portable: dict, inputs: Any) -> tuple[Any, str]:
        """(the probe's observations, "") from the fresh process, or (None, why not)."""
        limit = min(self.recipe.limits.cell_timeout, self.deadline - time.monotonic())
        if limit <= 0:
            return None, "no time was left for it"
        until = time.monotonic() + limit
        try:
            if self._running is None:
                self._start()
            if not self._ready:
                if self._reply(until) != READY:
                    raise _Broken("it did not start")
                self._ready = True
            self._send(json.dumps({"check": check, "portable": portable,
                                   "inputs": inputs}).encode() + b"\n", until)
            observed = json.loads(self._reply(until))
        except _Broken as broken:
            self.close()
            return None, str(broken)
        except (ValueError, RecursionError):
            self.close()
            return None, "its reply was not valid data"
        except OSError as error:  # it could not start (a cgroup, the sandbox)
            self.close()
            return None, f"it could not start: {error}"
        return observed, ""

    def close(self) -> None:
        if self._stack is not None:
            self._stack.close()
        self._stack, self._running, self._ready, self._pending = None, None, False, b""

    def _start(self) -> None:
        recipe = self.recipe
        if recipe.control.enforced:  # its group goes in the worker's, as its kernels' do
            Group(recipe.control, recipe.worker_group).ensure()
        stack = contextlib.ExitStack()
        folder = Path(tempfile.mkdtemp(prefix="alone-", dir=self.scratch_root))
        stack.callback(remove_tree, folder)
        command = [sys.executable, "-m", alone_server.__name__, *self.preload]
        try:
            self._running = stack.enter_context(sandbox.start(
                command, scratch=folder, limits=recipe.limits,
                env=dict(sandbox.default_env(folder), **recipe.env, HOME=str(folder)),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                **kernel_confinement(recipe)))
        except BaseException:
            stack.close()
            raise
        self._stack = stack

    def _send(self, data: bytes, until: float) -> None:
        assert self._running is not None and self._running.process.stdin is not None
        pipe = self._running.process.stdin.fileno()
        os.set_blocking(pipe, False)
        while data:
            if not select.select([], [pipe], [], max(0.0, until - time.monotonic()))[1]:
                raise _Broken("it stopped reading requests")
            try:
                data = data[os.write(pipe, data):]
            except BrokenPipeError as error:
                raise _Broken("it ended early") from error

    def _reply(self, until: float) -> bytes:
        """The next RESULT line's content; at most MAX_RESULT_BYTES are ever held."""
        assert self._running is not None and self._running.process.stdout is not None
        pipe = self._running.process.stdout.fileno()
        prefix = clean_run.RESULT.encode()
        cap = clean_run.MAX_RESULT_BYTES + len(prefix) + 1
        while b"\n" not in self._pending:
            if len(self._pending) > cap:
                raise _Broken("it said too much")
            if not select.select([pipe], [], [], max(0.0, until - time.monotonic()))[0]:
                raise _Broken("it ran past its time limit (the cell's, or what the "
                              "submission had left)")
            chunk = os.read(pipe, 65536)
            if not chunk:
                raise _Broken("it ended without a reply")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        if not line.startswith(prefix):
            raise _Broken("its reply was not valid data")
        return line[len(prefix):]


class _Broken(Exception):
    """The fresh process cannot answer this call (it is stopped; the next call starts one)."""
