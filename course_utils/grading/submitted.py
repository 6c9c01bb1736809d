"""nbgrader's ``submitted/<student>/<lesson>/`` layout, which formgrader counts.

Formgrader (nbgrader 0.9, ``NbGraderAPI``) counts a lesson's submissions as the folders
``<submitted_directory>/<student>/<lesson>/``, and shows a submission as graded only when its
``autograded/`` folder exists and the gradebook's timestamp equals the one in
``submitted/<student>/<lesson>/timestamp.txt``. ``course grade`` therefore keeps a copy of
each submission there (the files it graded, as submitted), with a timestamp, and records
that same timestamp in the gradebook.

When the submissions *are* that folder (``nbgrader collect`` gathered them from the
exchange: ``course grade grading-output/submitted``), nothing is copied and the timestamp
``nbgrader submit`` wrote is kept.
"""
from __future__ import annotations

import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

from .intake import Submission

TIMESTAMP_FILE = "timestamp.txt"
SECRET_FILE = "submission_secret.txt"
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"  # what `nbgrader submit` writes
MAX_TIMESTAMP_BYTES = 100


def parse_timestamp(text: str) -> datetime | None:
    """A timestamp as nbgrader reads it (naive UTC), or None when it cannot be read."""
    from nbgrader.utils import parse_utc

    try:
        return parse_utc(text.strip())
    except (ValueError, OverflowError):
        return None


def _read_timestamp(folder: Path) -> str | None:
    """The text of a submitted folder's timestamp.txt, if it is a small regular file."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(folder / TIMESTAMP_FILE, flags)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        raw = handle.read(MAX_TIMESTAMP_BYTES + 1)
    try:
        text = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    if len(raw) > MAX_TIMESTAMP_BYTES or parse_timestamp(text) is None:
        return None
    return text


def _newest_file_time(submission: Submission, folder: Path) -> str:
    """When the files were last changed (a learning platform's download keeps it), in UTC."""
    times = [os.lstat(notebook.path).st_mtime for notebook in submission.notebooks
             if notebook.path is not None]
    seconds = max(times) if times else os.lstat(folder).st_mtime
    return datetime.fromtimestamp(seconds, timezone.utc).strftime(TIMESTAMP_FORMAT)


def keep(submissions: Path, submission: Submission, submitted_dir: Path) -> datetime:
    """Make submitted_dir/<student>/<lesson>/ hold this submission; return its timestamp.

    Only the files the grader will read are copied (regular files, never links: intake has
    checked them), opened without following links.
    """
    source = submissions / submission.student / submission.lesson
    target = submitted_dir / submission.student / submission.lesson
    text = _read_timestamp(source) if source.is_dir() and not source.is_symlink() else None
    if text is None:
        text = _newest_file_time(submission, source) if source.exists() \
            else datetime.now(timezone.utc).strftime(TIMESTAMP_FORMAT)
    same = target.exists() and source.exists() and os.path.samefile(source, target)
    if not same:
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for notebook in submission.notebooks:
            if notebook.path is not None:
                _copy_no_follow(notebook.path, target / notebook.path.name)
        # What `nbgrader submit` gave it: release_feedback needs it (tools/handback.py).
        _copy_no_follow(source / SECRET_FILE, target / SECRET_FILE)
    if same and _read_timestamp(target) == text:
        return parse_timestamp(text)
    (target / TIMESTAMP_FILE).write_text(text + "\n", encoding="ascii")
    return parse_timestamp(text)


def _copy_no_follow(source: Path, target: Path) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(source, flags)
    except OSError:
        return  # changed since intake listed it: the worker reports it
    with os.fdopen(fd, "rb") as reader, target.open("wb") as writer:
        shutil.copyfileobj(reader, writer)
