"""``course grade --shard I/N``: one of N disjoint parts of a class, the same on every machine.

A student belongs to shard ``I`` (0 ≤ I < N) when the first 8 bytes of the SHA-256 of their
id, as an integer, are ``I`` modulo N: it depends on nothing but the id and N, so N runs on N
machines — a Slurm job array, a Kubernetes Indexed Job, a CI matrix — grade each student
exactly once, all of a student's lessons in the same run, without talking to each other.
Into one PostgreSQL gradebook (and with one ``--seed``) they record what one run records.

``--shard auto`` takes I and N from the scheduler (:func:`from_scheduler`), so that no count
is kept in step by hand: a Slurm array ``0-(N-1)`` gives both; a re-run of some tasks of it
(``--array=3,5``) takes N from the shards already recorded in the class's output folder
(shard_record.py); a Kubernetes Indexed Job gives I, and N from ``COURSE_SHARD_COUNT``.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

PATTERN = re.compile(r"^(\d+)/(\d+)$")


@dataclass(frozen=True)
class Shard:
    index: int  # 0-based: Slurm's --array=0-(N-1), Kubernetes' JOB_COMPLETION_INDEX
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"--shard must be I/N with N ≥ 1 and 0 ≤ I < N, got "
                             f"{self.index}/{self.count}.")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"2/8"`` → Shard(2, 8); a clear ValueError for anything else."""
        match = PATTERN.match(text.strip())
        if match is None:
            raise ValueError(f"--shard must look like I/N (e.g. 0/4: the first of 4 parts, "
                             f"0-based), got {text!r}.")
        return cls(int(match.group(1)), int(match.group(2)))

    def holds(self, student: str) -> bool:
        digest = hashlib.sha256(student.encode("utf-8")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


WHOLE = Shard(0, 1)


AUTO = "auto"
KUBERNETES_COUNT = "COURSE_SHARD_COUNT"  # the Job's `completions`, set beside it in the pod


@dataclass(frozen=True)
class Scheduled:
    """A shard and the scheduler it came from (``explicit``: the --shard I/N given)."""

    shard: Shard
    scheduler: str  # "slurm", "kubernetes" or "explicit"
    whole_array: bool = True  # False: a re-run of some of a Slurm array's tasks


def _integer(env: Mapping[str, str], name: str) -> int:
    value = env.get(name, "")
    if not value.isdigit():
        raise ValueError(f"--shard auto: {name} must be a whole number ≥ 0, got {value!r}.")
    return int(value)


def from_scheduler(env: Mapping[str, str], recorded_count: int | None) -> Scheduled:
    """This task's shard from the scheduler's environment; ValueError naming the mismatch.

    ``recorded_count`` is the N that earlier shards of this class were graded with (None
    when none is recorded): a whole array must agree with it, and a partial one (a re-run)
    takes it.
    """
    if "SLURM_ARRAY_TASK_ID" in env:
        index = _integer(env, "SLURM_ARRAY_TASK_ID")
        tasks, first, last = (_integer(env, f"SLURM_ARRAY_TASK_{part}")
                              for part in ("COUNT", "MIN", "MAX"))
        if first == 0 and tasks == last + 1:  # --array=0-(N-1): the whole class
            if recorded_count is not None and recorded_count != tasks:
                raise ValueError(
                    f"--shard auto: this array has {tasks} tasks (0-{last}) but this class was "
                    f"sharded {recorded_count} ways: submit --array=0-{recorded_count - 1}, "
                    "or remove the output folder's shard-* folders to start again.")
            return Scheduled(Shard(index, tasks), "slurm")
        if recorded_count is None:
            raise ValueError(
                f"--shard auto: this array ({first}-{last}, {tasks} tasks) is not 0-(N-1) and "
                "no earlier shard of this class is recorded in the output folder: submit the "
                "whole array first (--array=0-<N-1>), or pass --shard I/N.")
        if last >= recorded_count:
            raise ValueError(f"--shard auto: array task {last} does not exist in this class's "
                             f"{recorded_count} shards (0-{recorded_count - 1}).")
        return Scheduled(Shard(index, recorded_count), "slurm", whole_array=False)
    if "JOB_COMPLETION_INDEX" in env:
        if KUBERNETES_COUNT not in env:
            raise ValueError(f"--shard auto: a Kubernetes Indexed Job needs {KUBERNETES_COUNT} "
                             "(its completions) in the pod's environment.")
        index, count = _integer(env, "JOB_COMPLETION_INDEX"), _integer(env, KUBERNETES_COUNT)
        if index >= count or (recorded_count is not None and recorded_count != count):
            raise ValueError(
                f"--shard auto: completion index {index} of {KUBERNETES_COUNT}={count} does not "
                f"match this class's {recorded_count or count} shards: set completions and "
                f"{KUBERNETES_COUNT} to the same number.")
        return Scheduled(Shard(index, count), "kubernetes")
    raise ValueError("--shard auto found no scheduler index (SLURM_ARRAY_TASK_ID, "
                     "JOB_COMPLETION_INDEX): give --shard I/N (a CI matrix: "
                     "${{ strategy.job-index }}/${{ strategy.job-total }}).")


def resolve(text: str, env: Mapping[str, str], recorded_count: int | None) -> Scheduled:
    """``--shard auto`` or ``--shard I/N``; an explicit N must agree with the recorded one."""
    if text.strip() == AUTO:
        return from_scheduler(env, recorded_count)
    shard = Shard.parse(text)
    if recorded_count is not None and recorded_count != shard.count:
        raise ValueError(f"--shard {shard}: this class was sharded {recorded_count} ways (the "
                         f"output folder's shard-* records): use --shard I/{recorded_count}, or "
                         "remove those folders to start again.")
    return Scheduled(shard, "explicit")
