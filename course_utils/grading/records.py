"""The typed records a grading run passes around: limits, statuses and results.

Workers send these to the main process (they pickle as plain data); the gradebook, the CSV
table and the feedback pages are all written from them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum

from ..lab.args import is_real


class Status(str, Enum):
    """What happened to a submitted notebook, worst first when a lesson has several."""

    ERROR = "error"                # the grader itself failed (a bug): partial credit kept
    KERNEL_DIED = "kernel-died"    # the kernel or the grading worker died: credit so far kept
    TIMEOUT = "timeout"            # a cell or the whole submission ran out of time
    OUTPUT_LIMIT = "output-limit"  # a cell printed more than the cap
    INVALID = "invalid"            # not a readable notebook (or a symbolic link)
    MISSING = "missing"            # no such file was submitted
    TAMPERED = "tampered"          # graded cells changed: those score 0, the rest is graded
    GRADED = "graded"

    def __str__(self) -> str:
        return self.value

    @property
    def fully_graded(self) -> bool:
        """Every exercise got the verdict its code earned (tampered cells earn 0 by rule)."""
        return self in (Status.GRADED, Status.TAMPERED)


STATUS_ORDER = list(Status)


def worst(statuses: list[Status]) -> Status:
    """The status that describes a lesson made of notebooks with these statuses."""
    return min(statuses, key=STATUS_ORDER.index, default=Status.GRADED)


@dataclass(frozen=True)
class Limits:
    """Bounds on one submission's run. Each field names the `course grade` flag that sets it."""

    cell_timeout: float = field(default=60.0, metadata={"flag": "--cell-timeout", "unit": "s"})
    submission_timeout: float = field(default=240.0, metadata={"flag": "--timeout", "unit": "s"})
    memory_mb: int = field(default=4096, metadata={"flag": "--memory-mb", "unit": "MiB",
                                                   "zero_ok": True})  # 0: no cap
    output_bytes: int = field(default=1_000_000, metadata={"flag": "--max-output", "unit": "bytes"})
    # All the outputs of one notebook: what its autograded copy and the worker hold of them.
    total_output_bytes: int = field(default=10_000_000, metadata={"flag": "--max-total-output",
                                                                  "unit": "bytes"})
    max_notebook_mb: float = field(default=50.0, metadata={"flag": "--max-notebook-mb",
                                                           "unit": "MiB"})
    startup_timeout: float = field(default=60.0, metadata={"flag": "startup_timeout", "unit": "s"})
    max_file_mb: int = field(default=64, metadata={"flag": "max_file_mb", "unit": "MiB"})
    # Whole-sandbox limits (cgroups, see cgroups.py); memory_mb above caps the whole sandbox too.
    max_processes: int = field(default=512, metadata={"flag": "--max-processes",
                                                      "unit": "processes and threads"})
    max_open_files: int = field(default=1024, metadata={"flag": "--max-open-files",
                                                        "unit": "files per process"})

    def __post_init__(self) -> None:
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            allowed_zero = spec.metadata.get("zero_ok", False)
            if not is_real(value) or value < 0 or (value == 0 and not allowed_zero):
                rule = "a number ≥ 0 (0: no cap)" if allowed_zero else "a number > 0"
                raise ValueError(f"{spec.metadata['flag']} must be {rule} "
                                 f"({spec.metadata['unit']}), got {value!r}.")

    @property
    def max_notebook_bytes(self) -> int:
        return int(self.max_notebook_mb * 2**20)


@dataclass(frozen=True)
class ItemResult:
    """The verdict on one graded cell, and the instructor's, if one was given by hand."""

    grade_id: str
    points: float
    score: float | None  # None: a written answer, left for the instructor
    message: str
    docstring: str = ""
    # Given in formgrader and read back from the gradebook; never changed by re-grading.
    hand_score: float | None = None
    hand_comment: str = ""

    @property
    def manual(self) -> bool:
        """A written answer: graded by hand, never by the autograder."""
        return self.score is None

    @property
    def awarded(self) -> float | None:
        """The score that counts: the instructor's where given, else the autograder's."""
        return self.hand_score if self.hand_score is not None else self.score

    @property
    def ungraded(self) -> bool:
        """A written answer still waiting for its hand score."""
        return self.awarded is None


@dataclass(frozen=True)
class NotebookResult:
    """One submitted notebook: its status, why, and a verdict per graded cell."""

    name: str  # the lesson's notebook name (file stem), whatever the submitted file was called
    status: Status
    reason: str
    items: tuple[ItemResult, ...]


@dataclass(frozen=True)
class SubmissionResult:
    """One student's lesson."""

    student: str
    lesson: str
    notebooks: tuple[NotebookResult, ...]

    @property
    def items(self) -> list[ItemResult]:
        return [item for notebook in self.notebooks for item in notebook.items]

    @property
    def score(self) -> float:
        return sum(item.awarded or 0.0 for item in self.items)

    @property
    def max_score(self) -> float:
        return sum(item.points for item in self.items)

    @property
    def status(self) -> Status:
        return worst([notebook.status for notebook in self.notebooks])

    @property
    def reason(self) -> str:
        reasons = [notebook.reason for notebook in self.notebooks if notebook.reason]
        waiting = sum(item.ungraded for item in self.items)
        if self.status is Status.GRADED and waiting:
            reasons.append("1 written answer needs manual grading" if waiting == 1
                           else f"{waiting} written answers need manual grading")
        return "; ".join(reasons)
