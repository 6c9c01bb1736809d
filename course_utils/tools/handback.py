"""``course release-feedback``: feedback to the students through nbgrader's exchange, only for
what the instructor has finished grading.

``course grade`` writes each student's page as ``feedback/<student>/<lesson>/<notebook>.html``,
where nbgrader's ``generate_feedback`` would. This command releases it with nbgrader's own
``release_feedback`` (``ExchangeReleaseFeedback``), into ``<exchange>/gpu-course/feedback/``
under the hash of the notebook's name and the secret ``nbgrader submit`` gave the submission,
so that each student fetches their own with ``nbgrader fetch_feedback LESSON`` (or the
Assignments tab). A submission is held back, and listed with the reason, when:

* a written answer has no hand score yet (the gradebook still marks it as needing grading);
* a hand score was given or changed after the last ``course grade`` (its page and grades.csv
  do not count it yet: run ``course grade`` again, which keeps hand scores);
* it did not come through the exchange (no ``submission_secret.txt``: an LMS download; hand
  its ``feedback/<student>/<lesson>.html`` back yourself).
"""
from __future__ import annotations

import json
import shutil
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ..grading.changes import BASIS_FILE
from ..grading.options import option
from ..grading.submitted import SECRET_FILE, TIMESTAMP_FILE
from ..paths import check_lessons
from .exchange import COURSE_ID, prepare_exchange


@dataclass(frozen=True)
class FeedbackRelease:
    """What ``course release-feedback`` releases."""

    root: Path
    lessons: tuple[str, ...] = ()  # () every lesson
    out: Path = field(default=Path("grading-output"), metadata=option(
        flag="--out", metavar="FOLDER", read=Path,
        help="course grade's output folder (default: grading-output)"))
    db_url: str | None = field(default=None, metadata=option(
        flag="--db", metavar="URL", help="gradebook SQLAlchemy URL (default: sqlite in --out)"))


@dataclass(frozen=True)
class Released:
    released: list[tuple[str, str]] = field(default_factory=list)    # (student, lesson)
    held: list[tuple[str, str, str]] = field(default_factory=list)  # (student, lesson, why)
    exchange: Path | None = None


def release_feedback(request: FeedbackRelease) -> Released:
    """Release every finished submission's feedback of the lessons asked for; list the rest."""
    from ..grading import gradebook  # SQLAlchemy: here, not when `course` builds its options

    out = request.out
    db_url = gradebook.database_url(request.db_url
                                    or f"sqlite:///{(out / 'gradebook.db').resolve()}")
    database = gradebook.sqlite_path(db_url)
    if database is not None and not database.exists():
        raise ValueError(f"course release-feedback: no gradebook at {database}: run `course "
                         "grade` first (with the same --out).")
    lessons = check_lessons(request.root, list(request.lessons) or None)
    try:
        graded = json.loads((out / BASIS_FILE).read_text(encoding="utf-8"))["submissions"]
    except (OSError, ValueError, KeyError):
        graded = {}
    exchange = prepare_exchange(request.root)
    outcome = Released(exchange=exchange)
    ready: list[tuple[str, str]] = []
    with gradebook.Gradebook(db_url) as gb:
        for lesson in lessons:
            for submission in _submissions(gb, lesson):
                student = submission.student.id
                why = _held_because(out, student, lesson, submission,
                                    graded.get(f"{student}/{lesson}"))
                if why:
                    outcome.held.append((student, lesson, why))
                else:
                    ready.append((student, lesson))
    for student, lesson in ready:
        _release_one(request.root, out, exchange, student, lesson)
        outcome.released.append((student, lesson))
    return outcome


def _submissions(gb, lesson: str) -> list:
    from nbgrader.api import MissingEntry

    try:
        return list(gb.find_assignment(lesson).submissions)
    except MissingEntry:
        return []  # never graded


def _held_because(out: Path, student: str, lesson: str, submission, basis: dict | None) -> str:
    """Why this submission's feedback cannot go out yet; "" when it can."""
    grades = [grade for notebook in submission.notebooks for grade in notebook.grades]
    waiting = [grade.name for grade in grades if grade.needs_manual_grade]
    if waiting:
        return f"not hand-graded yet: {', '.join(waiting)}"
    if basis is None:
        return f"not graded by `course grade` into {out}"
    then = {grade_id: exercise["hand"] for grade_id, exercise in basis["exercises"].items()}
    changed = [grade.name for grade in grades
               if grade.name in then and grade.manual_score != then[grade.name]]
    if changed:
        return (f"hand-graded after the last `course grade` ({', '.join(changed)}): run it "
                "again so that the page and grades.csv count it")
    submitted = out / "submitted" / student / lesson
    if not (submitted / SECRET_FILE).is_file():
        return (f"not submitted through the exchange (no {SECRET_FILE}): hand back "
                f"{out / 'feedback' / student / lesson}.html yourself")
    pages = out / "feedback" / student / lesson
    if not any(pages.glob("*.html")):
        return f"no feedback page in {pages}: run `course grade` again"
    return ""


def _release_one(root: Path, out: Path, exchange: Path, student: str, lesson: str) -> None:
    """nbgrader's release_feedback for one student's lesson (the secret and time beside it)."""
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default import ExchangeReleaseFeedback
    from traitlets.config import Config

    pages = out / "feedback" / student / lesson
    for name in (SECRET_FILE, TIMESTAMP_FILE):
        shutil.copyfile(out / "submitted" / student / lesson / name, pages / name)
    config = Config()
    config.CourseDirectory.course_id = COURSE_ID
    config.Exchange.root = str(exchange)
    coursedir = CourseDirectory(config=config, root=str(root.resolve()),
                                feedback_directory=str((out / "feedback").resolve()),
                                assignment_id=lesson, student_id=student)
    releaser = ExchangeReleaseFeedback(coursedir=coursedir, config=config,
                                       authenticator=Authenticator(config=config))
    with warnings.catch_warnings():
        # nbgrader 0.9 reads timestamp.txt without closing it: a ResourceWarning, nothing more.
        warnings.simplefilter("ignore", ResourceWarning)
        releaser.start()
