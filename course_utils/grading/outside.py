"""The sandbox a check borrows to run learner code on the grader's side (checks.framework.Outside).

Lesson 07's check launches the learner's DDP script with torchrun. Launched from the learner's
kernel, everything about the run would be the kernel's word; so when grading, the worker runs
it here instead: a fresh scratch folder under the run's scratch root (which no kernel sees),
and :func:`sandbox.run` with the run's ``Limits``, those of a grading kernel (memory,
processes, open files, file size, output kept; its own cgroup, inside the worker's, so that
it shares the worker's CPU and goes with the run's group; as nobody when grading as root),
bounded by the submission's remaining time. The check reads back what it needs from the
folder, which is deleted after.
"""
from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from . import sandbox
from .scratch import remove_tree
from .session import CellTimeout, KernelRecipe

# What a trial keeps of the kernel's environment (threads per kernel, no GPU chatter).
KEPT = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONHASHSEED", "MPLBACKEND")


class OutsideSandbox:
    """Lent to one check call: ``folder()`` and ``run(command, scratch=, timeout=)``."""

    _names = itertools.count()

    def __init__(self, recipe: KernelRecipe, scratch_root: Path, deadline: float):
        self.recipe, self.scratch_root, self.deadline = recipe, Path(scratch_root), deadline

    @contextmanager
    def folder(self) -> Iterator[Path]:
        path = Path(tempfile.mkdtemp(prefix=f"outside-{next(self._names)}-",
                                     dir=self.scratch_root))
        try:
            yield path
        finally:
            remove_tree(path)

    def run(self, command: list[str], *, scratch: Path, timeout: float) -> sandbox.SandboxedRun:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise CellTimeout("the whole-submission time limit was reached")
        recipe = self.recipe
        env = dict(sandbox.default_env(Path(scratch)),
                   **{key: recipe.env[key] for key in KEPT if key in recipe.env})
        return sandbox.run(command, scratch=scratch, timeout=min(timeout, left),
                           limits=recipe.limits, env=env,
                           hidden=recipe.hidden, use_limits=recipe.control.enforced,
                           confined=recipe.bwrap is not None,
                           inside=recipe.worker_group if recipe.control.enforced else "")
