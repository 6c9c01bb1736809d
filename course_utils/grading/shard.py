"""``course grade --shard I/N``: one of N disjoint parts of a class, the same on every machine.

A student belongs to shard ``I`` (0 ≤ I < N) when the first 8 bytes of the SHA-256 of their
id, as an integer, are ``I`` modulo N: it depends on nothing but the id and N, so N runs on N
machines — a Slurm job array, a Kubernetes Indexed Job, a CI matrix — grade each student
exactly once, all of a student's lessons in the same run, without talking to each other.
Into one PostgreSQL gradebook (and with one ``--seed``) they record what one run records.
"""
from __future__ import annotations

import hashlib
import re
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
