"""What `course grade` asks of a run (:class:`GradeRequest`), and what a run tells its caller
as it goes (:data:`RunEvent`).

The request is every choice a run's outcome depends on, decided before it starts; a new
option of ``course grade`` (a cap on scratch space, a policy for late submissions) is one
more field here with its default. The events are one typed union, like the workers'
(worker.Event): a caller matches on the kinds it cares about and ignores the rest.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .cgroups import ResourceControl
from .late import (
    NO_EXTENSIONS,
    NO_LATE_POLICY,
    Extensions,
    LatePolicy,
    read_extensions,
    read_policy,
)
from .limited import FIXED_CAPS
from .options import option
from .records import Execution, Limits, SubmissionResult
from .roster import RosterStudent
from .sandbox import Isolation
from .shard import WHOLE, Shard


@dataclass(frozen=True)
class GradeRequest:
    """Grade every submission under SUBMISSIONS/<student>/<lesson>/ into ``out``."""

    root: Path                       # the course: its solutions/ say what is graded, and how
    submissions: Path
    out: Path                        # gradebook (unless db_url), grades, feedback, copies
    lessons: tuple[str, ...] = ()    # only these lessons; () every lesson
    db_url: str | None = None        # the gradebook (SQLAlchemy URL); None: sqlite in out
    jobs: int = 1                    # submissions graded at once
    limits: Limits = field(default_factory=Limits)
    seed: int | None = None          # of the hidden checks' inputs; None: drawn for the run
    use_sandbox: bool = True         # False: --unsafe-no-sandbox
    use_limits: bool = True          # False: --unsafe-no-limits (no control groups)
    shard: Shard = WHOLE             # grade only this part of the class (shard.py)
    roster: tuple[RosterStudent, ...] = ()  # names, and a row for who submitted nothing
    # Late work (late.py): recomputed from the scores on every run, never stacked.
    late_policy: LatePolicy = field(default=NO_LATE_POLICY, metadata=option(
        flag="--late-policy", metavar="TOML", read=read_policy,
        help="due dates per lesson and the penalty for late work (none, per-day with a cap, "
             "zero): docs/instructor.md, 'Late work'"))
    extensions: Extensions = field(default=NO_EXTENSIONS, metadata=option(
        flag="--extensions", metavar="CSV", read=read_extensions,
        help="extra days per student: student,lesson,days (lesson * for every lesson)"))
    # Which cells run (needed.py): NEEDED, only what the graded cells need, with a full run
    # where a check fails for want of a skipped cell; ALL, every cell, as nbgrader does.
    execute: Execution = field(default=Execution.NEEDED, metadata=option(
        flag="--execute", metavar="{needed,all}", read=Execution, choices=("needed", "all"),
        help="needed (default): run only the cells the graded cells need, and every cell where "
             "a check fails for want of a skipped one; all: every cell, as nbgrader does "
             "(docs/grading.md)"))


@dataclass(frozen=True)
class IsolationChosen:
    """Before any work: the isolation every kernel will run in."""

    isolation: Isolation


@dataclass(frozen=True)
class LimitsChosen:
    """Before any work: the caps each submission runs under, in one line, and who sets them."""

    summary: str
    resources: ResourceControl


@dataclass(frozen=True)
class SubmissionRecorded:
    """A submission's result is in the gradebook and its feedback page is written."""

    result: SubmissionResult
    done: int   # results recorded so far, this one included
    total: int  # submissions this run grades

    @property
    def line(self) -> str:
        result = self.result
        return (f"[{self.done}/{self.total}] {result.student} {result.lesson}: "
                f"{result.score:g}/{result.max_score:g} {result.status.value}")


RunEvent = IsolationChosen | LimitsChosen | SubmissionRecorded
OnEvent = Callable[[RunEvent], None]


def ignore(event: RunEvent) -> None:
    """The caller that listens to nothing."""


def describe_limits(resources: ResourceControl, limits: Limits, jobs: int) -> str:
    """One line naming exactly the caps each submission runs under: its control group's
    (when there is one), and the rlimits the launcher sets in each of its processes."""
    user = "as uid 65534 (nobody)" if os.geteuid() == 0 else "as you"
    per_process = ", ".join([*limits.per_process_caps(), *FIXED_CAPS])
    if not resources.enforced:
        return (f"{resources.description}. Per process only: {per_process}; "
                f"student code runs {user}")
    per_sandbox = ", ".join(limits.per_sandbox_caps())
    return (f"{resources.backend}: each sandbox {per_sandbox}, an equal CPU share among {jobs} "
            f"worker(s); each process {per_process}; student code runs {user}")
