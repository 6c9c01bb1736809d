"""Grade submissions in a worker process (started and fed by pool.py).

The student's code runs only in the kernels this process starts, and in the one process where
answers run again alone (alone.py); verdicts are computed here from the plain JSON the probes
return. Spare kernels start in the background, so the next notebook does not wait for Python
and torch to load; a kernel serves one notebook of one student and is never reused. A worker
tells the main process what it has decided as it goes (:class:`ItemDecided`,
:class:`NotebookDone`), so that if this process dies, the credit already earned is kept.
"""
from __future__ import annotations

import hashlib
import itertools
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from .alone import AloneProcess
from .autograded import write_autograded
from .check_api import run_check, score_fraction
from .execution import ENDINGS, CellsRun, needs_full_run, outcome
from .intake import InvalidSubmission, Submission, SubmittedNotebook, read_notebook
from .limited import cap_own_memory
from .needed import SKIPPED_OUTPUT, plan_cells
from .outside import OutsideSandbox
from .records import Execution, ItemResult, Limits, NotebookResult, Status
from .review import learner_code, review_reasons
from .scratch import filled, remove_tree
from .session import (
    CellTimeout,
    KernelDied,
    KernelRecipe,
    KernelSession,
    OutputLimit,
)
from .startup import skip_slow_optional_imports
from .structure import GradeItem, LessonNotebook, tampering


# ---------------------------------------------------------------------- messages and config
@dataclass(frozen=True)
class WorkerConfig:
    """What every job of a run shares."""

    run_seed: int
    limits: Limits
    recipe: KernelRecipe
    scratch_root: Path               # kernels' folders are made here (hidden from kernels)
    autograded_dir: Path | None      # where executed copies go, for nbgrader's formgrader
    spares: int = 1                  # kernels each worker keeps starting ahead
    execute: Execution = Execution.NEEDED  # which cells run (dependencies.py)


@dataclass(frozen=True)
class GradeJob:
    job_id: int
    submission: Submission
    # Lessons of the next jobs in the queue when this one was handed out: what spare kernels
    # are worth starting (none at the end of the run).
    upcoming: tuple[str, ...] = ()


@dataclass(frozen=True)
class CellStarted:
    job_id: int
    notebook: str
    cell_index: int


@dataclass(frozen=True)
class ItemDecided:
    job_id: int
    notebook: str
    item: ItemResult


@dataclass(frozen=True)
class NotebookDone:
    job_id: int
    result: NotebookResult


@dataclass(frozen=True)
class JobDone:
    job_id: int


Event = CellStarted | ItemDecided | NotebookDone | JobDone
Report = Callable[[Event], None]


def case_seed(run_seed: int, student: str, lesson: str, grade_id: str, index: int) -> int:
    """Inputs depend on the run's seed and the case, never on the order of grading."""
    text = f"{run_seed}/{student}/{lesson}/{grade_id}/{index}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:4], "big")


def verdict(item: GradeItem, score: float | None, message: str) -> ItemResult:
    return ItemResult(item.grade_id, item.points, score, message, item.docstring)


def not_graded(notebook: SubmittedNotebook, status: Status, reason: str,
               message: str | None = None) -> NotebookResult:
    """Every graded cell of a notebook at 0 (written answers too: nothing was submitted)."""
    items = tuple(verdict(item, 0.0, message or reason) for item in notebook.spec.items)
    return NotebookResult(notebook.spec.name, status, reason, items)


def unread(notebook: SubmittedNotebook) -> NotebookResult:
    """The result of a notebook with no file to grade (missing, a symbolic link, ...)."""
    problem = notebook.problem or Status.MISSING
    message = "not submitted" if problem is Status.MISSING else f"not graded: {notebook.note}"
    return not_graded(notebook, problem, notebook.note, message)


# ---------------------------------------------------------------------- kernels
class KernelSupply:
    """Fresh kernels, with spares starting in the background while one is in use.

    Up to ``spares`` kernels are kept starting ahead, each loading what the lesson it is
    expected to grade imports (two let a machine's second core prepare kernels even while a
    short notebook finishes faster than one kernel starts); never more than the notebooks
    still to come: a spare left at the end is work wasted.
    """

    def __init__(self, recipe: KernelRecipe, scratch_root: Path, spares: int):
        self.recipe = recipe
        self.scratch_root = scratch_root
        self.spares = spares
        self._waiting: deque[KernelSession] = deque()
        self._names = itertools.count()
        self._prefix = f"w{os.getpid()}-"
        self.alone = AloneProcess(recipe, scratch_root)  # where answers run again alone
        self.alone.start_ahead()  # on another core while the first kernel starts

    def _start(self, lesson: str) -> KernelSession:
        folder = self.scratch_root / f"{self._prefix}{next(self._names)}"
        session = KernelSession(folder, self.recipe, lesson)
        session.start()
        return session

    def take(self, lesson: str) -> KernelSession:
        """A kernel for one notebook of one student: the oldest live spare started for this
        lesson, else the oldest live spare, else a new one."""
        for candidate in list(self._waiting):
            if not candidate.alive():
                self._waiting.remove(candidate)
                self.discard(candidate)
        chosen = next((k for k in self._waiting if k.lesson == lesson), None) \
            or (self._waiting[0] if self._waiting else None)
        if chosen is None:
            return self._start(lesson)
        self._waiting.remove(chosen)
        return chosen

    def top_up(self, upcoming: list[str]) -> None:
        """Start spares for the lessons of the notebooks to come (called once the kernel in
        use is up, so that a cold start is not slowed down by its own successors)."""
        expected = upcoming[:self.spares]
        have = [kernel.lesson for kernel in self._waiting]
        for lesson in expected:
            if lesson in have:
                have.remove(lesson)
            elif len(self._waiting) < self.spares:
                self._waiting.append(self._start(lesson))

    def discard(self, session: KernelSession) -> None:
        session.kill()
        remove_tree(session.folder)

    def close(self) -> None:
        while self._waiting:
            self.discard(self._waiting.popleft())
        self.alone.close()


# ---------------------------------------------------------------------- grading
def grade_notebook(kernels: KernelSupply, config: WorkerConfig, submission: Submission,
                   notebook: SubmittedNotebook, deadline: float, report: Report,
                   job_id: int, upcoming: tuple[str, ...] = ()) -> NotebookResult:
    """Grade one submitted notebook; never raises for the student's faults. The stages: read
    the file; find graded cells that were changed; run the cells, checking each autograded
    item in the kernel; decide every item's verdict; write the autograded copy."""
    spec = notebook.spec
    if notebook.path is None:
        return unread(notebook)
    try:
        nb = read_notebook(notebook.path, config.limits.max_notebook_bytes)
    except InvalidSubmission as error:
        return not_graded(notebook, Status.INVALID, str(error), f"not graded: {error}")
    problems = tampering(nb, spec.items)
    plan = plan_cells(nb, spec) if config.execute is Execution.NEEDED else None
    started, run = time.monotonic(), CellsRun(plan=plan if plan and plan.skipped else None)
    _run_in_kernel(kernels, config, submission, spec, nb, problems, run, report,
                   (job_id, deadline, upcoming))
    if run.plan is not None and needs_full_run(run):  # in a fresh kernel, on a fresh clock
        run = CellsRun()
        _run_in_kernel(kernels, config, submission, spec, nb, problems, run, report,
                       (job_id, deadline + time.monotonic() - started, upcoming))
    full = f"it filled its {config.limits.scratch_mb} MiB of scratch space" * run.scratch_full
    if full and run.status is Status.GRADED:
        run.status = Status.SCRATCH_FULL
    status, reason = outcome(run.status, [run.stopped, run.refused, full], problems,
                             notebook.note)
    result = NotebookResult(spec.name, status, reason,
                            final_verdicts(spec.items, run.decided, problems, run.stopped),
                            "; ".join(dict.fromkeys(review_reasons(learner_code(nb, spec))
                                                    + run.review)),
                            Execution.ALL if run.plan is None else Execution.NEEDED)
    if config.autograded_dir is not None:
        target = config.autograded_dir / submission.student / submission.lesson / spec.filename
        write_autograded(target, nb, spec, result, run.outputs)
    return result


def _run_in_kernel(kernels: KernelSupply, config: WorkerConfig, submission: Submission,
                   spec: LessonNotebook, nb, problems: dict[str, str], run: CellsRun,
                   report: Report, when: tuple[int, float, tuple[str, ...]]) -> None:
    """Run ``nb`` in a fresh kernel into ``run``; ``when``: job, deadline, lessons to come."""
    (job_id, deadline, upcoming), session = when, kernels.take(submission.lesson)
    run.alone = kernels.alone
    try:
        session.begin(deadline)
        kernels.top_up(list(upcoming))  # they start while this notebook runs
        _run_cells(session, config, submission, spec, nb, problems, run, report, job_id)
    except (CellTimeout, OutputLimit, KernelDied) as error:
        run.end(ENDINGS[type(error)], str(error))  # what was decided before is kept
    except Exception as error:  # noqa: BLE001 - a grader bug costs this notebook only
        cap = f" (its data memory is capped at {config.limits.worker_memory_mb} MiB)"
        run.end(Status.ERROR, f"the grader failed: {error!r}{cap * (type(error) is MemoryError)}")
    finally:
        run.scratch_full |= filled(session.pid, session.home, config.limits.scratch_mb)
        run.refused = session.refusals()
        kernels.discard(session)


def _run_cells(session: KernelSession, config: WorkerConfig, submission: Submission,
               spec: LessonNotebook, nb, problems: dict[str, str], run: CellsRun,
               report: Report, job_id: int) -> None:
    """Run the code cells (those run.plan keeps) in order; check each autograded cell's item."""
    by_id = {item.grade_id: item for item in spec.items}
    for run.cell, cell in enumerate(nb.cells):
        item = by_id.get(cell.metadata.get("nbgrader", {}).get("grade_id"))
        if item is not None and item.grade_id in problems:
            continue  # a changed graded cell is neither run nor credited
        if item is not None and item.auto:
            if item.grade_id not in run.decided:
                report(CellStarted(job_id, spec.name, run.cell))
                run.decided[item.grade_id] = _check_item(session, config, submission, item,
                                                         run)
                report(ItemDecided(job_id, spec.name, run.decided[item.grade_id]))
            continue
        if run.plan is not None and run.cell in run.plan.skipped:
            run.outputs[run.cell] = [dict(SKIPPED_OUTPUT)]
        elif cell.cell_type == "code" and cell.source.strip():
            report(CellStarted(job_id, spec.name, run.cell))
            ran = session.run_cell(cell.source)
            run.outputs[run.cell] = ran.outputs
            run.errors += [ran.error] if ran.error else []


def final_verdicts(items: tuple[GradeItem, ...], decided: dict[str, ItemResult],
                   problems: dict[str, str], stopped: str) -> tuple[ItemResult, ...]:
    """Every graded cell's verdict: as decided, or 0 for a changed cell or one never reached
    (the grading stopped: ``stopped`` says why), or left for the instructor (written)."""
    verdicts = []
    for item in items:
        if item.grade_id in decided:
            verdicts.append(decided[item.grade_id])
        elif item.grade_id in problems:
            verdicts.append(verdict(item, 0.0, problems[item.grade_id] + "; it scores 0"))
        elif not item.auto:
            verdicts.append(verdict(item, None, "needs manual grading"))
        else:
            verdicts.append(verdict(item, 0.0, f"not checked: {stopped}" if stopped
                                    else "not checked"))
    return tuple(verdicts)


def _check_item(session: KernelSession, config: WorkerConfig, submission: Submission,
                item: GradeItem, run: CellsRun) -> ItemResult:
    """Each call of a test cell is a case; the points are the share of the deciding cases
    passed (the hidden ones where there are any), rounded to hundredths so that every report
    (table, CSV, gradebook) shows the same number."""
    verdicts, messages = [], []
    hidden_calls = any(call.hidden for call in item.calls)  # then they alone decide the points
    for index, call in enumerate(item.calls):
        seed = case_seed(config.run_seed, submission.student, submission.lesson,
                         item.grade_id, index)
        outside = OutsideSandbox(config.recipe, config.scratch_root, session.deadline,
                                 run.alone, decides=call.hidden or not hidden_calls)
        outcome = run_check(session, call, seed, outside)
        run.scratch_full |= outside.scratch_filled  # a check's trial filled its scratch
        run.review += outside.review
        if isinstance(outcome, str):  # not checkable at all: nothing else can be trusted
            return verdict(item, 0.0, ("Hidden test failed: " if call.hidden else "") + outcome)
        verdicts.append((call.hidden, outcome))
        if not outcome.passed:
            repeated = any(outcome.message == message for _, message in messages)
            messages.append((call.hidden, "the same problem as above." if repeated
                             else outcome.message))
    feedback = "\n".join(("Hidden test failed: " if hidden else "") + message
                         for hidden, message in messages)
    return verdict(item, round(item.points * score_fraction(verdicts), 2), feedback or "passed")


def grade_submission(kernels: KernelSupply, config: WorkerConfig, job: GradeJob,
                     report: Report) -> None:
    """Grade every notebook of one (student, lesson); the clock starts now."""
    deadline = time.monotonic() + config.limits.submission_timeout
    notebooks = job.submission.notebooks
    for index, notebook in enumerate(notebooks):
        upcoming = (job.submission.lesson,) * (len(notebooks) - index - 1) + job.upcoming
        result = grade_notebook(kernels, config, job.submission, notebook, deadline, report,
                                job.job_id, upcoming)
        report(NotebookDone(job.job_id, result))
    report(JobDone(job.job_id))


def worker_main(connection: Connection) -> None:
    """A worker process: read the run's WorkerConfig, then grade the jobs sent on
    ``connection`` until it sends None."""
    skip_slow_optional_imports()
    # Ctrl-C is the main process's business: it stops the workers in order (pool.py starts
    # workers with SIGINT ignored already).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # clean up kernels on terminate()
    try:
        config = connection.recv()
    except (EOFError, OSError):
        return
    if config is None:
        return  # not needed after all
    cap_own_memory(config.limits.worker_memory_mb)
    kernels = KernelSupply(config.recipe, config.scratch_root, config.spares)
    try:
        while True:
            job = connection.recv()
            if job is None:
                break
            grade_submission(kernels, config, job, connection.send)
    except (EOFError, BrokenPipeError):
        pass  # the main process is gone
    finally:
        kernels.close()
