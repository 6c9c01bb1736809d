"""What running a notebook's cells in one kernel gave (:class:`CellsRun`): the verdicts, the
outputs, how the run ended, which cells it skipped (needed.py), and whether a run that skipped
cells must be repeated in full (:func:`needs_full_run`)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .alone import AloneProcess
from .needed import Plan
from .records import ItemResult, Status
from .session import CellTimeout, KernelDied, OutputLimit


@dataclass
class CellsRun:
    """What running a notebook's cells in one kernel gave: verdicts, outputs and how it ended."""

    decided: dict[str, ItemResult] = field(default_factory=dict)  # by grade_id
    outputs: dict[int, list] = field(default_factory=dict)  # by cell index
    cell: int | None = None  # the cell being run
    status: Status = Status.GRADED
    stopped: str = ""  # why the run ended early, with the cell
    refused: str = ""  # what the kernel's cgroup refused (memory, processes)
    scratch_full: bool = False  # its folder's tmpfs, or a check's trial's, was full (scratch_mb)
    plan: Plan | None = None  # the cells it ran, where it skipped some
    errors: list[str] = field(default_factory=list)  # "Name: message" of cells that raised
    review: list[str] = field(default_factory=list)  # answers whose checks disagreed alone
    alone: AloneProcess | None = None  # where its answers run alone (checks.clean_run)

    def end(self, status: Status, why: str) -> None:
        self.status = status
        self.stopped = why if self.cell is None else f"{why} (in cell {self.cell})"


ENDINGS = {CellTimeout: Status.TIMEOUT, OutputLimit: Status.OUTPUT_LIMIT,
           KernelDied: Status.KERNEL_DIED}


# What a cell that should have run, and did not, leaves behind: a name undefined (one a
# skipped cell defines), an object without the attribute it would have set, a file it would
# have written. (An UnboundLocalError is the answer's own: skipping changes no local.)
UNDEFINED_NAME = re.compile(r"name '(\w+)' is not defined")
MISSING_THING = re.compile(r"\b(AttributeError|FileNotFoundError)\b")


def needs_full_run(run: CellsRun) -> bool:
    """Whether a run that skipped cells may have scored differently because of it: a lost
    point's message, or the error of a cell that ran, names a name a skipped cell defines,
    an AttributeError or a FileNotFoundError. Other failures (a stub's NotImplementedError, a
    wrong value, a timeout) are the answer's own, and a name no skipped cell defines would be
    undefined in the full run too."""
    if run.plan is None:
        return False
    lost = [item.message for item in run.decided.values() if (item.score or 0) < item.points]
    texts = [*lost, *run.errors]
    return any(name in run.plan.skipped_names for text in texts
               for name in UNDEFINED_NAME.findall(text)) \
        or any(MISSING_THING.search(text) for text in texts)


def outcome(status: Status, reasons: list[str], problems: dict[str, str],
            note: str) -> tuple[Status, str]:
    """A notebook's status and reason: why it stopped and what its limits refused; tampered
    cells where it ran to the end; the intake's note (a renamed file, say) first."""
    reason = "; ".join(filter(None, reasons))
    if problems and status is Status.GRADED:
        status, reason = Status.TAMPERED, "; ".join(problems.values())
    return status, "; ".join(filter(None, [note, reason]))
