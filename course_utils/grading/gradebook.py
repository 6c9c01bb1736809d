"""Record grades in nbgrader's gradebook (SQLite by default, PostgreSQL for shared grading).

Several `course grade` runs, on several machines, may write into one PostgreSQL gradebook
at once (each grading a shard of the class). Two things make that safe:

* the schema is created and the lessons registered under a PostgreSQL advisory lock, so
  exactly one run does it and the others then find it done;
* each submission is recorded in its own transaction, retried when a concurrent run created
  the same row first (a student graded for two lessons on two machines, say).
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import warnings
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, SAWarning

from ..paths import ensure_tools_on_path
from .late import NO_EXTENSIONS, NO_LATE_POLICY, Extensions, LatePolicy
from .records import SubmissionResult
from .roster import RosterStudent
from .structure import Lesson

if TYPE_CHECKING:
    from nbgrader.api import Gradebook as NbgraderGradebook
    from typing_extensions import Self  # typing.Self from Python 3.11

# nbgrader is imported where it is used: importing it takes seconds (its server extensions
# come with it), and a run starts its workers before it needs the gradebook.

POSTGRES_EXTRA = "pip install -e '.[postgres]'"
# Any fixed 64-bit number: the advisory lock every `course grade` run takes to set up a
# PostgreSQL gradebook.
SETUP_LOCK_KEY = 0x636F75727365  # "course"
RECORD_ATTEMPTS = 5


class GradebookUnavailable(ValueError):
    """The gradebook URL cannot be used here; the message says why and what to do."""


def _alembic_head() -> str:
    """nbgrader's newest schema revision, stamped into a new gradebook.

    nbgrader asks a separate `alembic` process for it (about 4 s here); alembic's own API
    gives the same answer in-process.
    """
    import nbgrader
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(Path(nbgrader.__file__).parent / "alembic"))
    return ScriptDirectory.from_config(config).get_current_head()


def database_url(db_url: str) -> str:
    """The URL to open, with its driver checked; GradebookUnavailable in one line otherwise.

    A plain ``postgresql://`` URL means psycopg 3 (the ``postgres`` extra) whatever the
    installed SQLAlchemy's default driver is.
    """
    try:
        url = make_url(db_url)
    except ArgumentError:
        raise GradebookUnavailable(
            f"--db {db_url!r} is not a database URL; use e.g. sqlite:///gradebook.db or "
            "postgresql://user@host/course.") from None
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    shown = url.render_as_string(hide_password=True)
    try:
        dialect = url.get_dialect()
    except Exception as error:  # noqa: BLE001 - SQLAlchemy: unknown dialect name
        raise GradebookUnavailable(f"--db {shown}: unknown database kind ({error}).") from None
    try:
        dialect.import_dbapi()
    except ImportError as error:
        if url.get_backend_name() == "postgresql":
            raise GradebookUnavailable(
                f"--db {shown} needs the PostgreSQL driver psycopg 3, which is not installed "
                f"({error}); install the course's postgres extra: {POSTGRES_EXTRA}") from None
        raise GradebookUnavailable(f"--db {shown} needs a database driver that is not "
                                   f"installed ({error}).") from None
    return url.render_as_string(hide_password=False)


def sqlite_path(db_url: str) -> Path | None:
    """The file of an SQLite gradebook, or None for a server database."""
    url = make_url(db_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database)


def Gradebook(db_url: str) -> NbgraderGradebook:
    """nbgrader's Gradebook, stamping a new database with the schema revision in-process."""
    import nbgrader.api

    ensure_tools_on_path()
    nbgraders_own = nbgrader.api.get_alembic_version
    nbgrader.api.get_alembic_version = _alembic_head
    try:
        return nbgrader.api.Gradebook(db_url)
    finally:
        nbgrader.api.get_alembic_version = nbgraders_own


@contextlib.contextmanager
def _setup_lock(db_url: str) -> Iterator[None]:
    """Held while one run creates the schema and registers lessons (PostgreSQL only)."""
    url: URL = make_url(db_url)
    if url.get_backend_name() != "postgresql":
        yield  # SQLite: one machine, one run at a time
        return
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": SETUP_LOCK_KEY})
            try:
                yield
            finally:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"),
                                   {"key": SETUP_LOCK_KEY})
                connection.commit()
    finally:
        engine.dispose()


def register_lessons(db_url: str, lessons: list[Lesson]) -> None:
    """Create the gradebook if needed, and each assignment, notebook and graded cell."""
    with _setup_lock(db_url), Gradebook(db_url) as gb:
        for lesson in lessons:
            gb.update_or_create_assignment(lesson.name)
            for notebook in lesson.notebooks:
                gb.update_or_create_notebook(notebook.name, lesson.name)
                for item in notebook.items:
                    gb.update_or_create_grade_cell(item.grade_id, notebook.name, lesson.name,
                                                   max_score=item.points,
                                                   cell_type=item.cell_type)
                for grade_id in notebook.solution_cells:
                    gb.update_or_create_solution_cell(grade_id, notebook.name, lesson.name)


class GradebookWriter:
    """One open gradebook that records results one at a time, as they arrive."""

    def __init__(self, db_url: str, late_policy: LatePolicy = NO_LATE_POLICY,
                 extensions: Extensions = NO_EXTENSIONS):
        self._gb = Gradebook(db_url)
        self._late = (late_policy, extensions)  # late.py: recomputed on every record

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self._gb.close()

    def record(self, result: SubmissionResult,
               timestamp: datetime | None = None) -> SubmissionResult:
        """Store one submission; return it with the hand grades the gradebook holds.

        Re-grading replaces the autograder's scores and comments, never the instructor's: a
        score or comment given in formgrader stays, and comes back in the returned result
        (for grades.csv and the feedback page). ``timestamp`` is the submission's time, as
        in ``submitted/<student>/<lesson>/timestamp.txt`` (formgrader compares the two).
        Retries a unique-key race: a concurrent run may insert the same student or
        submission between our look-up and our insert; the retry then finds that row.
        """
        from nbgrader.api import InvalidEntry

        for attempt in range(RECORD_ATTEMPTS):
            try:
                with _quiet_nbgrader(), warnings.catch_warnings():
                    # nbgrader's add_submission trips SQLAlchemy's autoflush warning; the rows
                    # are right.
                    warnings.filterwarnings("ignore", category=SAWarning)
                    recorded = _record(self._gb, result, timestamp, *self._late)
                    self._gb.db.commit()
                return recorded
            except (InvalidEntry, IntegrityError):
                self._gb.db.rollback()
                if attempt == RECORD_ATTEMPTS - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")


@contextlib.contextmanager
def _quiet_nbgrader() -> Iterator[None]:
    """nbgrader logs a traceback before raising on a unique-key race, which we retry."""
    logger = logging.getLogger("tornado.application")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _record(gb: NbgraderGradebook, result: SubmissionResult, timestamp: datetime | None,
            late_policy: LatePolicy = NO_LATE_POLICY,
            extensions: Extensions = NO_EXTENSIONS) -> SubmissionResult:
    from nbgrader.api import MissingEntry

    from .late_plugin import apply_late_policy

    gb.update_or_create_student(result.student)
    try:
        submission = gb.find_submission(result.lesson, result.student)
        if timestamp is not None:
            submission.timestamp = timestamp
    except MissingEntry:
        extra = {} if timestamp is None else {"timestamp": timestamp}
        gb.add_submission(result.lesson, result.student, **extra)
    notebooks = []
    for notebook in result.notebooks:
        items = []
        for item in notebook.items:
            grade = gb.find_grade(item.grade_id, notebook.name, result.lesson, result.student)
            grade.auto_score = None if item.manual else float(item.score)
            # A written answer waits for the instructor until a hand score is given; a hand
            # score (or an override of an autograded one) is the instructor's and stays.
            grade.needs_manual_grade = item.manual and grade.manual_score is None
            hand_comment = ""
            try:
                comment = gb.find_comment(item.grade_id, notebook.name, result.lesson,
                                          result.student)
                comment.auto_comment = item.message
                hand_comment = comment.manual_comment or ""
            except MissingEntry:
                pass  # test cells have no comment row in nbgrader's schema
            items.append(dataclasses.replace(item, hand_score=grade.manual_score,
                                             hand_comment=hand_comment))
        notebooks.append(dataclasses.replace(notebook, items=tuple(items)))
    graded = dataclasses.replace(result, notebooks=tuple(notebooks))
    return apply_late_policy(gb, graded, timestamp, late_policy, extensions)


def register_students(db_url: str, students: list[RosterStudent]) -> None:
    """Put a roster's names (and emails) into the gradebook: formgrader shows "Last, First"."""
    with _setup_lock(db_url), Gradebook(db_url) as gb:
        for student in students:
            gb.update_or_create_student(student.id, first_name=student.first_name or None,
                                        last_name=student.last_name or None,
                                        email=student.email)


def record_all(db_url: str, results: list[SubmissionResult]) -> list[SubmissionResult]:
    """Store several results (each in its own transaction); return them with hand grades."""
    with GradebookWriter(db_url) as writer:
        return [writer.record(result) for result in results]


def shown_url(db_url: str) -> str:
    """The URL for messages: the file of an SQLite gradebook, a server URL without password."""
    database = sqlite_path(db_url)
    return str(database) if database is not None \
        else make_url(db_url).render_as_string(hide_password=True)


def upgrade(db_url: str) -> None:
    """Bring an existing gradebook to nbgrader's current schema (`nbgrader db upgrade`).

    A gradebook that does not exist yet needs nothing: it is created at the newest revision.
    nbgrader migrates by running the `alembic` executable, which must be on PATH: this
    environment's scripts folder is put there.
    """
    database = sqlite_path(db_url)
    if database is not None and not database.exists():
        return
    engine = create_engine(db_url)
    try:
        with engine.connect() as connection:
            tables = set(inspect(connection).get_table_names())
            current = connection.execute(text("SELECT version_num FROM alembic_version")) \
                .scalar() if "alembic_version" in tables else None
    finally:
        engine.dispose()
    if not tables or current == _alembic_head():
        return  # empty (created below) or already current
    from nbgrader import dbutil

    ensure_tools_on_path()
    dbutil.upgrade(db_url)
