"""What each shard of a class did, kept beside its output: ``OUT/shard-I/shard.json``.

With ``--shard``, ``--out`` is the class's folder and shard I writes into ``OUT/shard-I/``.
Its :class:`ShardRecord` is written when the run starts (``running``) and again when it ends
(``finished``, ``interrupted`` or ``failed``), so that ``course collect`` can tell, without the
scheduler's accounting (Slurm forgets a task minutes after it ends), which shards never ran,
which were cancelled or killed, and exactly how to run those again. The records also carry
the class's N and seed: a later task must agree with them (shard.resolve).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from .records import ItemResult, NotebookResult, Status, SubmissionResult
from .shard import Scheduled, Shard, resolve

RECORD_FILE = "shard.json"
RESULTS_FILE = "results.jsonl"  # each result as recorded, checkers' messages included
STALE_TABLES = ("grades.csv", "grades.json", RESULTS_FILE)
RUNNING, FINISHED, INTERRUPTED, FAILED = "running", "finished", "interrupted", "failed"


@dataclass(frozen=True)
class ShardRecord:
    """One shard's run of a class: what it graded, how, and how it ended."""

    index: int
    count: int
    seed: int
    scheduler: str            # slurm, kubernetes or explicit (shard.Scheduled)
    course: str               # the course folder the run graded with
    submissions: str          # the class's submissions folder
    gradebook: str            # the gradebook's URL, password hidden
    lessons: tuple[str, ...]  # the lessons graded; () every lesson
    host: str
    pid: int
    started: str              # ISO 8601, UTC
    state: str = RUNNING
    ended: str = ""
    graded: int = 0           # submissions recorded in the gradebook by this run
    not_graded: int = 0       # submissions it had left when it stopped
    job: str = ""             # the scheduler's name for the task (Slurm: JOBID_INDEX)

    @property
    def shard(self) -> Shard:
        return Shard(self.index, self.count)


def folder(out: Path, shard: Shard) -> Path:
    """Where shard I of a class writes: grades, feedback, submitted/ and autograded/."""
    return out / f"shard-{shard.index}"


def recorded(out: Path) -> list[ShardRecord]:
    """The records under ``out``'s shard-* folders, by index (unreadable ones are skipped:
    ``course collect`` then reports that shard as never run)."""
    records = []
    for path in out.glob(f"shard-*/{RECORD_FILE}"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            record = ShardRecord(**{**data, "lessons": tuple(data.get("lessons", ()))})
        except (OSError, ValueError, TypeError):
            continue
        if path.parent == folder(out, record.shard):
            records.append(record)
    return sorted(records, key=lambda record: record.index)


def class_plan(out: Path) -> tuple[int, int] | None:
    """(N, seed) that the recorded shards of this class agree on; None when none is recorded;
    ValueError when they disagree (two gradings mixed in one folder)."""
    plans = {(record.count, record.seed) for record in recorded(out)}
    if len(plans) > 1:
        shown = ", ".join(f"{count} shards with seed {seed}" for count, seed in sorted(plans))
        raise ValueError(f"{out}/shard-*/{RECORD_FILE} mix two gradings ({shown}): remove the "
                         "shard-* folders of the one to drop, then grade again.")
    return next(iter(plans), None)


def plan(text: str, out: Path, seed: int | None, db_url: str | None,
         env: Mapping[str, str]) -> Scheduled:
    """This run's shard, checked against the class's recorded N and seed."""
    known = class_plan(out)
    if db_url is None:
        raise ValueError("--shard needs --db (or $COURSE_GRADEBOOK_URL): the one gradebook "
                         "every shard of the class records into, e.g. "
                         "postgresql://grader@db.example/course.")
    if seed is None:
        raise ValueError("--shard needs --seed: every shard of a class draws the hidden "
                         "checks' inputs from the same seed"
                         + (f" (this class's: --seed {known[1]})." if known else "."))
    if known is not None and known[1] != seed:
        raise ValueError(f"--seed {seed}: this class's shards were graded with --seed "
                         f"{known[1]} ({out}/shard-*/{RECORD_FILE}); use it, or remove those "
                         "folders to start again.")
    return resolve(text, env, known[0] if known else None)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _write(out: Path, record: ShardRecord) -> None:
    path = folder(out, record.shard) / RECORD_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(dataclasses.asdict(record), indent=2) + "\n",
                         encoding="utf-8")
    os.replace(temporary, path)  # a reader sees the old record or the new, never half


class ShardRun:
    """The record of the run in progress; :meth:`ended` writes how it ended."""

    def __init__(self, out: Path, record: ShardRecord):
        self.out, self.record = out, record
        self.kept = 0  # results recorded so far

    def keep(self, result: SubmissionResult) -> None:
        """Append a recorded result: ``course collect`` rebuilds the feedback pages from these
        (the gradebook holds scores and hand comments, not the checkers' messages)."""
        with (folder(self.out, self.record.shard) / RESULTS_FILE).open(
                "a", encoding="utf-8") as handle:
            handle.write(json.dumps(dataclasses.asdict(result)) + "\n")
        self.kept += 1

    def ended(self, state: str, graded: int, not_graded: int) -> None:
        self.record = dataclasses.replace(self.record, state=state, ended=_now(),
                                          graded=graded, not_graded=not_graded)
        _write(self.out, self.record)


@contextlib.contextmanager
def running(out: Path, scheduled: Scheduled, *, seed: int, course: Path, submissions: Path,
            gradebook: str, lessons: tuple[str, ...],
            env: Mapping[str, str]) -> Iterator[ShardRun]:
    """Record the shard as running; if the body raises before :meth:`ShardRun.ended`, record
    it as ``interrupted`` (Ctrl-C, SIGTERM) or ``failed``, and let the exception go on."""
    job = ""
    if scheduled.scheduler == "slurm":
        job = f"{env.get('SLURM_ARRAY_JOB_ID', '?')}_{env.get('SLURM_ARRAY_TASK_ID', '?')}"
    elif scheduled.scheduler == "kubernetes":
        job = env.get("HOSTNAME", "")
    run = ShardRun(out, ShardRecord(
        scheduled.shard.index, scheduled.shard.count, seed, scheduled.scheduler,
        str(course.resolve()), str(submissions.resolve()), gradebook, lessons,
        socket.gethostname(), os.getpid(), _now(), job=job))
    for stale in STALE_TABLES:  # an earlier run's complete tables must not look like this one's
        (folder(out, scheduled.shard) / stale).unlink(missing_ok=True)
    _write(out, run.record)
    try:
        yield run
    except (KeyboardInterrupt, SystemExit):
        if run.record.state == RUNNING:
            run.ended(INTERRUPTED, run.kept, 0)
        raise
    except BaseException:
        if run.record.state == RUNNING:
            run.ended(FAILED, run.kept, 0)
        raise


def kept_results(shard_folder: Path) -> dict[tuple[str, str], SubmissionResult]:
    """The results a shard kept, by (student, lesson); the last one of each wins."""
    path = shard_folder / RESULTS_FILE
    kept: dict[tuple[str, str], SubmissionResult] = {}
    if not path.exists():
        return kept
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
            result = SubmissionResult(data["student"], data["lesson"], tuple(
                NotebookResult(notebook["name"], Status(notebook["status"]), notebook["reason"],
                               tuple(ItemResult(**item) for item in notebook["items"]))
                for notebook in data["notebooks"]))
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a kill: that result counts as not kept
        kept[(result.student, result.lesson)] = result
    return kept
