"""The sandbox a check borrows to run learner code on the grader's side (checks.framework.Outside).

Lesson 07's check launches the learner's DDP script with torchrun. Launched from the learner's
kernel, everything about the run would be the kernel's word; so when grading, the worker runs
it here instead: a fresh scratch folder under the run's scratch root (which no kernel sees),
and :func:`sandbox.run` with the run's ``Limits``, those of a grading kernel (memory,
processes, open files, file size, output kept; its own cgroup, inside the worker's, so that
it shares the worker's CPU and goes with the run's group; as nobody when grading as root),
bounded by the submission's remaining time. Sandboxed, the command's scratch is a tmpfs of
the kernel's ``scratch_mb`` (all its files together capped, counted in its memory, gone with
it: nothing it writes reaches the grader's disk), so what the check needs back comes on its
standard output; unsandboxed (--unsafe-no-sandbox) it is the folder itself, deleted after.
"""
from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from . import sandbox
from .scratch import remove_tree
from .session import CellTimeout, KernelRecipe

# What a trial keeps of the kernel's environment (threads per kernel, no GPU chatter).
KEPT = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONHASHSEED", "MPLBACKEND")


class Alone(Protocol):
    """The worker's process for answers run alone (alone.AloneProcess)."""

    deadline: float

    def observe(self, check: str, portable: dict, inputs: Any) -> tuple[Any, str]: ...


class OutsideSandbox:
    """Lent to one check call: ``folder()`` and ``run(command, scratch=, timeout=)``, and the
    worker's process for answers run alone (``observe_alone``: check_api.py)."""

    _names = itertools.count()

    def __init__(self, recipe: KernelRecipe, scratch_root: Path, deadline: float,
                 alone: Alone | None = None, decides: bool = True):
        self.recipe, self.scratch_root, self.deadline = recipe, Path(scratch_root), deadline
        self.scratch_filled = False  # a run filled its scratch (the notebook: scratch-full)
        self.alone, self.decides = alone, decides  # decides: points hang on this call
        self.review: list[str] = []  # what the instructor should look at (review.py's column)

    def observe_alone(self, check: str, portable: dict, inputs) -> tuple[object, str]:
        """The check's probe run on ``portable`` in the worker's alone process (alone.py)."""
        if self.alone is None:
            return None, "no process was lent for it"
        self.alone.deadline = self.deadline
        return self.alone.observe(check, portable, inputs)

    def note_review(self, reason: str) -> None:
        self.review.append(reason)

    @property
    def scratch_mb(self) -> int:
        """The cap on a run's scratch, all files together (0: none, unsandboxed)."""
        return kernel_confinement(self.recipe)["scratch_mb"]

    def mark_scratch_filled(self) -> None:
        self.scratch_filled = True

    @contextmanager
    def folder(self) -> Iterator[Path]:
        path = Path(tempfile.mkdtemp(prefix=f"outside-{next(self._names)}-",
                                     dir=self.scratch_root))
        try:
            yield path
        finally:
            remove_tree(path)

    def run(self, command: list[str], *, scratch: Path, timeout: float, stdin: bytes = b"",
            output_bytes: int = 0) -> sandbox.SandboxedRun:
        """``command`` in ``scratch`` (a tmpfs of ``scratch_mb`` when sandboxed), ``stdin`` on
        its input; ``output_bytes``: how much of each stream to keep (default: the kernel's
        cap on a cell's output)."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise CellTimeout("the whole-submission time limit was reached")
        recipe = self.recipe
        limits = replace(recipe.limits, output_bytes=output_bytes) if output_bytes \
            else recipe.limits
        env = dict(sandbox.default_env(Path(scratch)),
                   **{key: recipe.env[key] for key in KEPT if key in recipe.env})
        return sandbox.run(command, scratch=scratch, timeout=min(timeout, left),
                           limits=limits, env=env, stdin=stdin, **kernel_confinement(recipe))


def kernel_confinement(recipe: KernelRecipe) -> dict[str, Any]:
    """sandbox.run's and sandbox.start's options for a process the grader starts for a check
    (a trial here, the alone process in alone.py): confined as the run's kernels are, its
    group inside the worker's, its scratch a tmpfs of the kernel's size when sandboxed."""
    enforced, confined = recipe.control.enforced, recipe.bwrap is not None
    return {"hidden": recipe.hidden, "use_limits": enforced, "confined": confined,
            "inside": recipe.worker_group if enforced else "",
            "scratch_mb": recipe.limits.scratch_mb if confined else 0}
