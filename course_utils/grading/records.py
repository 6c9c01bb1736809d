"""The typed records a grading run passes around: limits, statuses and results.

Workers send these to the main process (they pickle as plain data); the gradebook, the CSV
table and the feedback pages are all written from them.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ..lab.args import is_real


class Status(str, Enum):
    """What happened to a submitted notebook, worst first when a lesson has several."""

    ERROR = "error"                # the grader itself failed (a bug): partial credit kept
    KERNEL_DIED = "kernel-died"    # the kernel or the grading worker died: credit so far kept
    TIMEOUT = "timeout"            # a cell or the whole submission ran out of time
    OUTPUT_LIMIT = "output-limit"  # a cell printed more than the cap
    SCRATCH_FULL = "scratch-full"  # the kernel filled its folder (Limits.scratch_mb)
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


class Execution(str, Enum):
    """Which cells of a notebook grading runs (`course grade --execute`), and which run gave
    a notebook's verdicts."""

    NEEDED = "needed"  # what the graded cells need (dependencies.py); the full run as fallback
    ALL = "all"        # every cell, as nbgrader does

    def __str__(self) -> str:
        return self.value


def worst(statuses: list[Status]) -> Status:
    """The status that describes a lesson made of notebooks with these statuses."""
    return min(statuses, key=STATUS_ORDER.index, default=Status.GRADED)


@dataclass(frozen=True)
class Cap:
    """How a run's summary names one cap: ``text`` with the value at ``{}``; ``uncapped``
    where the value is 0 and 0 means no cap."""

    text: str
    uncapped: str = ""

    def describe(self, value: float) -> str:
        return self.uncapped if value == 0 and self.uncapped else self.text.format(_number(value))


def _number(value: float) -> str:
    """As the command line takes it: 1000000 (not 1e+06), 60 (not 60.0), 2.5."""
    return str(value) if isinstance(value, int) else f"{value:g}"


@dataclass(frozen=True)
class LimitSpec:
    """Everything said of one limit besides its value, declared once beside its field:
    `course grade` builds its option and help from it, the launcher's options come from
    ``per_process``, the sandbox's control group enforces ``per_sandbox``, and the run's
    summary line names both."""

    help: str                       # what it bounds, for `course grade --help`
    unit: str                       # shown in --help and in the error for a bad value
    flag: str | None = None         # its `course grade` option; None: internal, set in code
    zero_ok: bool = False           # 0 means "no cap"
    per_process: Cap | None = None  # an rlimit the launcher sets (limited.py --<field-name>)
    per_sandbox: Cap | None = None  # a cap of the sandbox's control group (groups.py)

    def option_help(self, default: float) -> str:
        """The --help text: what it bounds, its unit and its default."""
        return (f"{self.help}; default: {_number(default)} {self.unit}"
                + (" (0: no cap)" if self.zero_ok else ""))

    @property
    def metavar(self) -> str:
        """The option's value in --help: its unit (``--timeout SECONDS``)."""
        return "SECONDS" if self.unit == "s" else self.unit.split()[0].upper()


def _limit(default: float, **spec) -> Any:
    """A field of :class:`Limits` and its :class:`LimitSpec`."""
    return field(default=default, metadata={"limit": LimitSpec(**spec)})


def spec_of(limit: dataclasses.Field) -> LimitSpec:
    return limit.metadata["limit"]


@dataclass(frozen=True)
class Limits:
    """Bounds on one submission's run, each declared once with its :class:`LimitSpec`.

    A new limit is a field here (its option, help, unit and default come with it) plus the
    one module that enforces it: limited.py for a per-process rlimit (an option named after
    the field), groups.py for a cap of the sandbox's control group.
    """

    cell_timeout: float = _limit(60.0, flag="--cell-timeout", unit="s",
                                 help="time limit of one cell")
    submission_timeout: float = _limit(240.0, flag="--timeout", unit="s",
                                       help="time limit of a whole submission")
    memory_mb: int = _limit(
        4096, flag="--memory-mb", unit="MiB", zero_ok=True,
        help="memory of a submission's sandbox, all its processes together, shared memory "
             "and tmpfs included; also each process's data memory (RLIMIT_DATA)",
        per_sandbox=Cap("{} MiB of memory (shared memory and tmpfs included)",
                        "no memory cap"),
        per_process=Cap("{} MiB of data memory (RLIMIT_DATA: not the address space)",
                        "no data-memory cap"))
    max_processes: int = _limit(512, flag="--max-processes", unit="processes and threads",
                                help="processes and threads of a submission's sandbox at once",
                                per_sandbox=Cap("{} processes and threads"))
    max_open_files: int = _limit(1024, flag="--max-open-files", unit="files per process",
                                 help="open files of each process",
                                 per_process=Cap("{} open files (RLIMIT_NOFILE)"))
    output_bytes: int = _limit(1_000_000, flag="--max-output", unit="bytes",
                               help="output of one cell (past it the kernel is killed)")
    # All the outputs of one notebook: what its autograded copy and the worker hold of them.
    total_output_bytes: int = _limit(10_000_000, flag="--max-total-output", unit="bytes",
                                     help="output of a whole notebook (its autograded copy)")
    max_notebook_mb: float = _limit(50.0, flag="--max-notebook-mb", unit="MiB",
                                    help="larger submitted files are not read (status invalid)")
    # Everything a kernel sends, counted frame by frame before it is held (received.py).
    max_message_mb: float = _limit(8.0, flag="--max-message-mb", unit="MiB",
                                   help="one message from a kernel, content and buffers")
    max_cell_received_mb: float = _limit(
        64.0, flag="--max-cell-received-mb", unit="MiB",
        help="all messages from a kernel during one cell, those discarded included")
    max_notebook_received_mb: float = _limit(
        256.0, flag="--max-notebook-received-mb", unit="MiB",
        help="all messages from a kernel during one notebook")
    worker_memory_mb: int = _limit(
        4096, flag="--worker-memory-mb", unit="MiB", zero_ok=True,
        help="data memory of each grading worker (RLIMIT_DATA): past it, its submission is "
             "`error` with the credit so far")
    scratch_mb: int = _limit(
        1024, flag="--max-scratch-mb", unit="MiB",
        help="files a submission's kernel may keep in its folder, all together (a tmpfs, "
             "counted in its memory), and a check's trial (lesson 07's torchrun) in its "
             "own: past it, status scratch-full")
    # Internal: no option on the command line.
    startup_timeout: float = _limit(60.0, unit="s", help="time a kernel has to start")
    max_file_mb: int = _limit(64, unit="MiB", help="largest file a sandboxed process may write",
                              per_process=Cap("files of at most {} MiB (RLIMIT_FSIZE)"))

    def __post_init__(self) -> None:
        for limit in dataclasses.fields(self):
            value, spec = getattr(self, limit.name), spec_of(limit)
            if not is_real(value) or value < 0 or (value == 0 and not spec.zero_ok):
                rule = "a number ≥ 0 (0: no cap)" if spec.zero_ok else "a number > 0"
                raise ValueError(f"{spec.flag or limit.name} must be {rule} "
                                 f"({spec.unit}), got {value!r}.")

    @property
    def max_notebook_bytes(self) -> int:
        return int(self.max_notebook_mb * 2**20)

    def launcher_options(self) -> list[str]:
        """The launcher's rlimit options (limited.py), one per per-process cap, named after
        its field: what the kernel's command and every sandboxed command pass."""
        options: list[str] = []
        for limit in dataclasses.fields(self):
            if spec_of(limit).per_process is not None:
                options += ["--" + limit.name.replace("_", "-"), str(getattr(self, limit.name))]
        return options

    def per_process_caps(self) -> list[str]:
        """What the launcher caps in each process, in words (the run's summary line)."""
        return self._caps(lambda spec: spec.per_process)

    def per_sandbox_caps(self) -> list[str]:
        """What the sandbox's control group caps, in words (the run's summary line)."""
        return self._caps(lambda spec: spec.per_sandbox)

    def _caps(self, cap_of: Callable[[LimitSpec], Cap | None]) -> list[str]:
        return [cap.describe(getattr(self, limit.name)) for limit in dataclasses.fields(self)
                if (cap := cap_of(spec_of(limit))) is not None]


def command_line_limits() -> list[dataclasses.Field]:
    """The fields of :class:`Limits` that `course grade` has an option for, in order."""
    return [limit for limit in dataclasses.fields(Limits) if spec_of(limit).flag]


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
    review: str = ""  # what its code reaches or patches (review.py): graded, for a person to judge
    execution: Execution = Execution.ALL  # the run that gave these verdicts


@dataclass(frozen=True)
class Lateness:
    """How late a submission came, and what the late policy (late.py) took for it."""

    seconds_late: float  # past the due date, extension and grace included; 0: on time
    penalty: float       # points taken off the lesson's total (nbgrader: per notebook, summed)
    extension_days: float = 0.0

    def describe(self) -> str:
        """For the reason column and the feedback page: 'submitted 1.5 days late: -2 points'."""
        days = self.seconds_late / 86400
        granted = f" (after a {self.extension_days:g}-day extension)" if self.extension_days else ""
        return f"submitted {days:.2f} days late{granted}: -{self.penalty:g} points"


@dataclass(frozen=True)
class SubmissionResult:
    """One student's lesson."""

    student: str
    lesson: str
    notebooks: tuple[NotebookResult, ...]
    late: Lateness | None = None  # None: no due date, or on time

    @property
    def items(self) -> list[ItemResult]:
        return [item for notebook in self.notebooks for item in notebook.items]

    @property
    def raw_score(self) -> float:
        """The exercises' scores, before any late penalty."""
        return sum(item.awarded or 0.0 for item in self.items)

    @property
    def penalty(self) -> float:
        return self.late.penalty if self.late is not None else 0.0

    @property
    def score(self) -> float:
        """The score that counts: the exercises' scores less the late penalty."""
        return self.raw_score - self.penalty

    @property
    def max_score(self) -> float:
        return sum(item.points for item in self.items)

    @property
    def status(self) -> Status:
        return worst([notebook.status for notebook in self.notebooks])

    @property
    def review(self) -> str:
        return "; ".join(notebook.review for notebook in self.notebooks if notebook.review)

    @property
    def execution(self) -> Execution:
        """NEEDED when every notebook's verdicts came from a run that skipped cells."""
        needed = self.notebooks and all(notebook.execution is Execution.NEEDED
                                        for notebook in self.notebooks)
        return Execution.NEEDED if needed else Execution.ALL

    @property
    def reason(self) -> str:
        reasons = [notebook.reason for notebook in self.notebooks if notebook.reason]
        waiting = sum(item.ungraded for item in self.items)
        if self.status is Status.GRADED and waiting:
            reasons.append("1 written answer needs manual grading" if waiting == 1
                           else f"{waiting} written answers need manual grading")
        if self.late is not None and self.late.seconds_late > 0:
            reasons.append(self.late.describe())
        return "; ".join(reasons)
