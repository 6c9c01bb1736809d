"""Grading workers that survive one another: a dead worker costs only its own submission.

Each worker is a process of our own (started with "spawn", so nothing of the main
process's state leaks into it) fed one job at a time over a pipe. The main process watches
both the pipes and the processes themselves: a worker that dies — killed by a student's code
when there is no sandbox, by the OOM killer, by a bug — is replaced at once, and its
submission keeps the credit it had earned (status ``kernel-died``). A worker that hangs past
its submission's time limit plus a grace period is killed the same way (status ``timeout``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
import multiprocessing
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import TYPE_CHECKING, Any

from .intake import Submission
from .records import ItemResult, NotebookResult, Status, SubmissionResult
from .session import MAX_WAIT_SHARE
from .worker import (
    CellStarted,
    GradeJob,
    ItemDecided,
    JobDone,
    NotebookDone,
    WorkerConfig,
    final_verdicts,
    not_graded,
    worker_main,
)

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

GRACE_S = 30.0  # beyond a submission's own limits, before its worker is presumed hung
POLL_S = 0.5


@dataclass
class Progress:
    """What the main process knows of a job while its worker grades it."""

    job: GradeJob
    started: float
    notebooks: dict[str, NotebookResult] = field(default_factory=dict)
    items: dict[str, list[ItemResult]] = field(default_factory=dict)
    current: str | None = None
    cell_index: int | None = None

    def salvage(self, status: Status, what: str) -> SubmissionResult:
        """The result so far: finished notebooks as they are, checked exercises keep credit."""
        where = f" (in cell {self.cell_index})" if self.cell_index is not None else ""
        reason = what + where
        results = []
        for notebook in self.job.submission.notebooks:
            name = notebook.spec.name
            if name in self.notebooks:
                results.append(self.notebooks[name])
                continue
            if name != self.current:
                results.append(not_graded(notebook, status, reason,
                                          f"not checked: {reason}"))
                continue
            decided = {item.grade_id: item for item in self.items.get(name, [])}
            results.append(NotebookResult(name, status, reason, final_verdicts(
                notebook.spec.items, decided, {}, reason)))
        submission = self.job.submission
        return SubmissionResult(submission.student, submission.lesson, tuple(results))

    def result(self) -> SubmissionResult:
        submission = self.job.submission
        return SubmissionResult(submission.student, submission.lesson, tuple(
            self.notebooks[notebook.spec.name] for notebook in submission.notebooks))


class _Worker:
    """One worker process and its pipe. It loads as soon as it is started; it is told the
    run's configuration (its first message) once the main process knows it."""

    def __init__(self, context: Any):
        self.connection, theirs = context.Pipe()
        self.process = context.Process(target=worker_main, args=(theirs,), daemon=True)
        # Started with SIGINT ignored (a new Python keeps an ignored SIGINT ignored), so that
        # Ctrl-C at the terminal, which reaches the whole process group, cannot kill a worker
        # while it is still importing: stopping is the main process's business.
        with _sigint_ignored():
            self.process.start()
        theirs.close()
        self.progress: Progress | None = None

    def configure(self, config: WorkerConfig) -> None:
        self.connection.send(config)

    def assign(self, queue: deque[GradeJob], spares: int) -> None:
        """Hand out the next job, saying which lessons come after it."""
        job = queue.popleft()
        self.progress = Progress(job, time.monotonic())
        upcoming = tuple(next_job.submission.lesson for next_job in itertools.islice(queue, spares))
        self.connection.send(dataclasses.replace(job, upcoming=upcoming))

    def stop(self) -> None:
        try:
            self.connection.send(None)
        except OSError:
            pass

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.connection.close()


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class StopRequest:
    """Set by the first Ctrl-C: finish the bookkeeping of what is done, grade nothing more.

    Signals can only be caught in the main thread; elsewhere Ctrl-C keeps its usual effect.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous = None

    def __enter__(self) -> Self:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.requested:  # a second Ctrl-C: stop at once
            raise KeyboardInterrupt
        self.requested = True

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


class WorkerPool:
    """``size`` grading workers, started at once so that they load (Python, jupyter_client,
    nbformat) while the main process reads the lessons and lists the submissions."""

    def __init__(self, size: int):
        self._context = multiprocessing.get_context("spawn")
        self._workers = [_Worker(self._context) for _ in range(size)]
        self._surplus: list[_Worker] = []  # told to leave: fewer submissions than workers

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop every worker and wait until each is gone (killed if it is not within 10 s),
        with the kernels it started; a second call does nothing."""
        workers, self._workers, self._surplus = self._workers + self._surplus, [], []
        _shut_down(workers)

    def run(self, submissions: list[Submission], config: WorkerConfig,
            on_result: Callable[[SubmissionResult], None],
            while_starting: Callable[[], None] = lambda: None,
            stop: StopRequest | None = None) -> int:
        """Grade the submissions (biggest first); return how many results were delivered.

        ``on_result`` gets each result as soon as it is known. ``while_starting`` runs once the
        first jobs are handed out (the main process's own chores overlap the workers').
        """
        queue = deque(GradeJob(index, submission) for index, submission in
                      sorted(enumerate(submissions), key=lambda pair: -pair[1].size))
        pool = self._workers
        self._surplus += pool[len(queue):]
        del pool[len(queue):]
        for worker in pool:
            worker.configure(config)
            worker.assign(queue, config.spares)
        while_starting()
        done = 0
        while any(worker.progress for worker in pool):
            if stop is not None and stop.requested:
                break
            ready = set(wait([w.connection for w in pool if w.progress]
                             + [w.process.sentinel for w in pool], timeout=POLL_S))
            if stop is not None and stop.requested:
                break  # what is in flight now is not graded, not failed
            for worker in list(pool):
                finished, failure = _check(worker, ready, config)
                if finished is not None:
                    on_result(finished)
                    done += 1
                if failure is not None:
                    if worker.progress is not None:
                        on_result(worker.progress.salvage(*failure))
                        done += 1
                    worker.kill()
                    pool.remove(worker)
                    if queue:  # the pool is rebuilt
                        worker = _Worker(self._context)
                        worker.configure(config)
                        pool.append(worker)
                if worker in pool and worker.progress is None and queue:
                    worker.assign(queue, config.spares)
        return done


def _check(worker: _Worker, ready: set, config: WorkerConfig) -> tuple[
        SubmissionResult | None, tuple[Status, str] | None]:
    """What a worker has to say: (a finished result or None, a failure or None)."""
    finished, failure = None, None
    if worker.connection in ready:
        finished, failure = _drain(worker)
        if failure is not None:  # its pipe closed: say how it ended, once it has
            worker.process.join(timeout=5)
            if not worker.process.is_alive():
                failure = _death(worker.process.exitcode, config)
    if failure is None and worker.process.sentinel in ready and not worker.process.is_alive():
        failure = _death(worker.process.exitcode, config)
    if failure is None and worker.progress is not None \
            and time.monotonic() - worker.progress.started > _hang_limit(worker.progress, config):
        failure = (Status.TIMEOUT, ("grading did not finish within the time limit "
                                    "(the grading worker hung and was killed)"))
    return finished, failure


def _death(exitcode: int | None, config: WorkerConfig) -> tuple[Status, str]:
    """A dead worker's submission status: killed (SIGKILL: by the OOM killer or, unsandboxed,
    by student code) is `kernel-died`; any other end (an abort or exception, at its own
    memory cap say) is the grader's failure, `error`. Credit so far is kept either way."""
    if exitcode == -signal.SIGKILL:
        return Status.KERNEL_DIED, "the grading worker died"
    cap = config.limits.worker_memory_mb
    return Status.ERROR, (f"the grading worker failed (exit code {exitcode}"
                          + (f"; its data memory is capped at {cap} MiB" if cap else "") + ")")


def _hang_limit(progress: Progress, config: WorkerConfig) -> float:
    """Seconds after which a worker is presumed hung: the submission's limits, a grace
    period, and each notebook's possible extension for time lost waiting for a core."""
    limits = config.limits
    waits = limits.cell_timeout * MAX_WAIT_SHARE * len(progress.job.submission.notebooks)
    return limits.submission_timeout + limits.startup_timeout + GRACE_S + waits


def _drain(worker: _Worker) -> tuple[SubmissionResult | None,
                                     tuple[Status, str] | None]:
    """Read every waiting message: (a finished result or None, a failure or None)."""
    progress = worker.progress
    try:
        while worker.connection.poll():
            event = worker.connection.recv()
            if progress is None or event.job_id != progress.job.job_id:
                continue
            if isinstance(event, CellStarted):
                progress.current, progress.cell_index = event.notebook, event.cell_index
            elif isinstance(event, ItemDecided):
                progress.items.setdefault(event.notebook, []).append(event.item)
            elif isinstance(event, NotebookDone):
                progress.notebooks[event.result.name] = event.result
                progress.current, progress.cell_index = None, None
            elif isinstance(event, JobDone):
                worker.progress = None
                return progress.result(), None
    except (EOFError, OSError):
        return None, (Status.KERNEL_DIED, "the grading worker died")
    return None, None


def _shut_down(pool: list[_Worker]) -> None:
    """Idle workers leave on their own; busy ones (after Ctrl-C) are terminated."""
    for worker in pool:
        if worker.progress is None:
            worker.stop()
        elif worker.process.is_alive():
            worker.process.terminate()  # it kills its kernels on the way out
    deadline = time.monotonic() + 10
    for worker in pool:
        worker.process.join(timeout=max(0.1, deadline - time.monotonic()))
        worker.kill()
