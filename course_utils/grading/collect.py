"""``course collect``: is a sharded class complete? Then the whole class's tables, from the
gradebook, and the shards' copies gathered where formgrader reads them.

Complete means: every shard 0..N-1 recorded ``finished`` (shard_record.py), and every
submission in the class's folder has its row in the gradebook. What is not complete is
named — which shards never ran, were cancelled, killed or failed, which students' lessons
have no grade — with the exact commands that grade those shards again, and nothing is
written. What is complete is written like one `course grade` of the whole class:
``grades.csv``, ``grades.json``, ``feedback/<student>/<lesson>.html`` with
``feedback/index.html``, and formgrader's ``submitted/`` and ``autograded/`` in OUT. Scores
come from the gradebook, so hand grades given in formgrader since are in them: run it again
after hand grading.
"""
from __future__ import annotations

import dataclasses
import html
import shlex
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from ..paths import check_lessons
from . import feedback, gradebook
from .records import ItemResult, Limits, NotebookResult, Status, SubmissionResult
from .report import Row
from .roster import RosterStudent
from .runner import ClassToGrade, read_class, write_tables
from .shard import WHOLE, Shard
from .shard_record import (
    FAILED,
    INTERRUPTED,
    RECORD_FILE,
    RUNNING,
    ShardRecord,
    class_plan,
    folder,
    kept_results,
    recorded,
)
from .structure import Lesson
from .workspace import owner_alive

FORMGRADER_FOLDERS = ("submitted", "autograded")
SLURM_SCRIPT = "docs/cluster/grade.slurm"


@dataclass(frozen=True)
class CollectRequest:
    """Check, and write, the whole class graded in shards under ``out``."""

    root: Path                        # the course
    out: Path                         # the class's folder: shard-*/ inside, its tables here
    db_url: str | None = None         # None: the gradebook the shards recorded
    submissions: Path | None = None   # None: the folder the shards recorded
    roster: tuple[RosterStudent, ...] = ()


@dataclass(frozen=True)
class ShardProblem:
    index: int
    what: str  # why the shard must be graded again, in words


@dataclass(frozen=True)
class ClassCheck:
    """Whether the class is complete, and if not, what is missing and how to grade it."""

    count: int
    seed: int
    problems: tuple[ShardProblem, ...]
    ungraded: tuple[tuple[str, str], ...]  # (student, lesson) with no row in the gradebook
    rerun: tuple[str, ...]                 # commands that grade exactly the shards named
    submissions: int                       # submissions in the class's folder

    @property
    def complete(self) -> bool:
        return not self.problems

    def report(self) -> str:
        if self.complete:
            return (f"Complete: {self.count} shard(s) finished; all {self.submissions} "
                    f"submission(s) are in the gradebook (seed {self.seed}).")
        lines = [(f"Incomplete: {len(self.problems)} of {self.count} shard(s) to grade again; "
                 f"{len(self.ungraded)} of {self.submissions} submission(s) have no grade.")]
        lines += [f"  shard {problem.index}/{self.count}: {problem.what}"
                  for problem in self.problems]
        lines += ["Grade them again (then run course collect again):",
                  *(f"  {command}" for command in self.rerun)]
        return "\n".join(lines)


def _record_problem(record: ShardRecord | None, index: int, out: Path) -> str:
    if record is None:
        return f"never ran (no {out / f'shard-{index}' / RECORD_FILE})"
    where = f"on {record.host}" + (f", job {record.job}" if record.job else "")
    if record.state == RUNNING:
        if record.host == socket.gethostname() and not owner_alive(
                {"host": record.host, "pid": record.pid}):
            return f"started {record.started} {where} and was killed (process {record.pid} is gone)"
        return (f"started {record.started} {where} and has not finished: still running, or "
                "cancelled or killed")
    if record.state == INTERRUPTED:
        left = f", {record.not_graded} left" if record.not_graded else ""
        return (f"was interrupted at {record.ended or '?'} {where} (cancelled, or Ctrl-C) "
                f"after recording {record.graded} submission(s){left}")
    if record.state == FAILED:
        return f"failed at {record.ended} {where}: see its log"
    return ""


def _rerun_commands(records: list[ShardRecord], indices: list[int], out: Path, db: str,
                    seed: int, submissions: Path, lessons: tuple[str, ...]) -> tuple[str, ...]:
    count = records[0].count
    if not indices:
        return ()
    course = records[0].course
    lesson_flags = [flag for name in lessons for flag in ("--lesson", name)]
    commands = [shlex.join(["course", "grade", str(submissions), "--shard", f"{index}/{count}",
                            "--db", db, "--seed", str(seed), "--out", str(out), *lesson_flags])
                for index in indices]
    if any(record.scheduler == "slurm" for record in records) and not lessons:
        exports = (f"ALL,COURSE={course},SUBMISSIONS={submissions},DB_URL={db},SEED={seed},"
                   f"OUT={out}")
        commands.insert(0, shlex.join(["sbatch", f"--array={','.join(map(str, indices))}",
                                       f"--export={exports}", f"{course}/{SLURM_SCRIPT}"]))
    return tuple(commands)


def _in_gradebook(db_url: str, lessons: list[str]) -> dict[tuple[str, str, str, str], tuple]:
    """(student, lesson, notebook, grade_id) -> (auto score, hand score, hand comment)."""
    from nbgrader.api import MissingEntry

    found: dict[tuple[str, str, str, str], tuple] = {}
    with gradebook.Gradebook(db_url) as gb:
        for lesson in lessons:
            try:
                submissions = gb.assignment_submissions(lesson)
            except MissingEntry:
                continue
            for submission in submissions:
                for notebook in submission.notebooks:
                    comments = {comment.name: comment.manual_comment or ""
                                for comment in notebook.comments}
                    for grade in notebook.grades:
                        found[(submission.student.id, lesson, notebook.name, grade.name)] = (
                            grade.auto_score, grade.manual_score, comments.get(grade.name, ""))
    return found


def _named_students(db_url: str) -> list[RosterStudent]:
    """The gradebook's students that have a name (a roster imported by `course grade`)."""
    with gradebook.Gradebook(db_url) as gb:
        return [RosterStudent(student.id, student.first_name or "", student.last_name or "",
                              student.email) for student in gb.students
                if student.first_name or student.last_name]


@dataclass(frozen=True)
class _Class:
    klass: ClassToGrade
    db_url: str
    stored: dict[tuple[str, str, str, str], tuple]
    records: list[ShardRecord]


def check(request: CollectRequest) -> tuple[ClassCheck, _Class]:
    """Whether the class under ``request.out`` is completely graded; ValueError when there
    is nothing to check (no shard records) or the records disagree."""
    records = recorded(request.out)
    plan = class_plan(request.out)
    if plan is None:
        raise ValueError(f"{str(request.out)!r} holds no shard records (shard-*/{RECORD_FILE}): "
                         "grade the class with `course grade --shard` into it first "
                         "(docs/cluster.md).")
    count, seed = plan
    submissions = request.submissions or Path(records[0].submissions)
    if not submissions.is_dir():
        raise ValueError(f"The class's submissions folder {str(submissions)!r} is not there; "
                         "pass --submissions.")
    lessons = records[0].lessons
    db_url = gradebook.database_url(request.db_url or records[0].gradebook)
    # Without a roster, the names the shards' --roster put into the gradebook.
    roster = list(request.roster) or _named_students(db_url)
    klass = read_class(request.root, submissions, check_lessons(request.root, list(lessons)
                                                                or None),
                       WHOLE, roster, Limits().max_notebook_bytes)
    stored = _in_gradebook(db_url, list(klass.lessons))
    graded = {(student, lesson) for student, lesson, _, _ in stored}
    ungraded = [(s.student, s.lesson) for s in klass.found if (s.student, s.lesson) not in graded]
    by_index = {record.index: record for record in records}
    problems = {index: what for index in range(count)
                if (what := _record_problem(by_index.get(index), index, request.out))}
    for student, lesson in ungraded:
        index = next(i for i in range(count) if Shard(i, count).holds(student))
        problems.setdefault(index, f"finished, but {student}/{lesson} has no grade in the "
                                   "gradebook (submitted after the shard ran?)")
    shown_db = request.db_url or make_url(db_url).render_as_string(hide_password=True)
    rerun = _rerun_commands(records, sorted(problems), request.out, shown_db, seed,
                            submissions, lessons)
    result = ClassCheck(count, seed, tuple(ShardProblem(index, problems[index])
                                           for index in sorted(problems)),
                        tuple(ungraded), rerun, len(klass.found))
    return result, _Class(klass, db_url, stored, records)


def _with_gradebook_scores(result: SubmissionResult, stored: dict) -> SubmissionResult:
    """A kept result with the gradebook's scores: the autograder's as recorded, and any hand
    score and comment given in formgrader since."""
    notebooks = []
    for notebook in result.notebooks:
        items = []
        for item in notebook.items:
            auto, hand, comment = stored.get(
                (result.student, result.lesson, notebook.name, item.grade_id),
                (item.score, item.hand_score, item.hand_comment))
            score = None if item.manual else (auto if auto is not None else item.score)
            items.append(dataclasses.replace(item, score=score,
                                             hand_score=hand, hand_comment=comment))
        notebooks.append(dataclasses.replace(notebook, items=tuple(items)))
    return dataclasses.replace(result, notebooks=tuple(notebooks))


def _gather(source: Path, target: Path, student: str, lesson: str) -> None:
    """Copy one student's lesson folder into the class's, replacing what was there."""
    origin = source / student / lesson
    if not origin.is_dir():
        return
    destination = target / student / lesson
    shutil.rmtree(destination, ignore_errors=True)
    shutil.copytree(origin, destination, symlinks=True)


def write_index(feedback_folder: Path, rows: list[Row]) -> None:
    """feedback/index.html: every student's lessons, score and status, linking each page."""
    lines = ["<!doctype html><meta charset='utf-8'><title>Feedback</title>",
             f"<style>{feedback.STYLE}</style><h1>Feedback: the whole class</h1><table>",
             "<tr><th>student</th><th>lesson</th><th>score</th><th>status</th></tr>"]
    for row in rows:
        page = feedback_folder / row.student / f"{row.lesson}.html"
        lesson = html.escape(row.lesson)
        link = (f"<a href='{html.escape(row.student)}/{lesson}.html'>{lesson}</a>"
                if page.exists() else lesson)
        lines.append(f"<tr><td>{html.escape(row.student)}</td><td>{link}</td>"
                     f"<td>{row.score:g} / {row.max_score:g}</td>"
                     f"<td>{html.escape(row.status.value)}</td></tr>")
    feedback_folder.mkdir(parents=True, exist_ok=True)
    (feedback_folder / "index.html").write_text("\n".join([*lines, "</table>"]) + "\n",
                                                encoding="utf-8")


def write_class(request: CollectRequest, checked: ClassCheck, found: _Class) -> list[Row]:
    """The whole class's tables, feedback pages and formgrader's folders, in ``request.out``."""
    if not checked.complete:
        raise ValueError("the class is not completely graded:\n" + checked.report())
    klass, out = found.klass, request.out
    kept: dict[tuple[str, str], SubmissionResult] = {}
    for record in found.records:
        kept.update(kept_results(folder(out, record.shard)))
    results = []
    for submission in klass.found:
        key = (submission.student, submission.lesson)
        result = kept.get(key) or _from_gradebook_only(klass.lessons[submission.lesson],
                                                       submission.student)
        results.append(_with_gradebook_scores(result, found.stored))
        shard_folder = folder(out, Shard(next(i for i in range(checked.count)
                                              if Shard(i, checked.count).holds(key[0])),
                                         checked.count))
        for name in FORMGRADER_FOLDERS:
            _gather(shard_folder / name, out / name, *key)
    for result in results:
        feedback.write(out / "feedback", result)
    rows, _ = write_tables(out, klass, results, checked.seed)
    write_index(out / "feedback", rows)
    return rows


def _from_gradebook_only(lesson: Lesson, student: str) -> SubmissionResult:
    """A result for a submission the gradebook holds but no shard kept (its results file
    was lost): scores come from the gradebook, the checkers' messages are not known."""
    return SubmissionResult(student, lesson.name, tuple(
        NotebookResult(notebook.name, Status.GRADED, "", tuple(
            ItemResult(item.grade_id, item.points, 0.0 if item.auto else None, "",
                       item.docstring) for item in notebook.items))
        for notebook in lesson.notebooks))
