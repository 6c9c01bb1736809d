"""Find the submitted files and read them as untrusted data.

Submissions arrive as archives unpacked from a learning platform, so anything may be there:
symbolic links (to the instructor's solutions, say), renamed downloads (``setup (1).ipynb``),
FIFOs, huge or deeply nested files. The rules:

* a symbolic link is never followed: the notebook is ``invalid`` ("is a symbolic link");
* a file over the size cap is ``invalid`` without being read;
* any failure to parse, ``RecursionError`` included, is ``invalid`` with a one-line reason;
* when the expected file is absent and exactly one other ``.ipynb`` is there, that file is
  graded and the reason says so; otherwise the reason lists what was found.

Discovery only lists folders (``lstat``); files are opened and parsed by the grading workers,
never by the main process, so a hostile file can at worst cost its own row.
"""
from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .records import Status
from .structure import Lesson, LessonNotebook

if TYPE_CHECKING:
    from nbformat import NotebookNode

SHOWN_ENTRIES = 10  # how many found files a "missing" reason lists


class InvalidSubmission(ValueError):
    """The file is not a gradable notebook; the message says why, in one line."""


@dataclass(frozen=True)
class SubmittedNotebook:
    """One notebook a lesson expects, and what the student's folder holds for it."""

    spec: LessonNotebook
    path: Path | None      # the file to grade; None when there is nothing to grade
    size: int = 0
    problem: Status | None = None  # MISSING or INVALID when path is None
    note: str = ""         # the reason shown in the table (why not graded, or what was graded)


@dataclass(frozen=True)
class Submission:
    """One student's folder for one lesson."""

    student: str
    lesson: str
    notebooks: tuple[SubmittedNotebook, ...]

    @property
    def size(self) -> int:
        """Bytes to grade: a cheap stand-in for how long the submission takes."""
        return sum(notebook.size for notebook in self.notebooks)

    @property
    def gradable(self) -> bool:
        return any(notebook.path is not None for notebook in self.notebooks)


def shown(name: str) -> str:
    """A file name from a student, quoted on one line (control characters escaped)."""
    return repr(name)


def discover(submissions: Path, lessons: dict[str, Lesson], max_bytes: int) -> list[Submission]:
    """Every SUBMISSIONS/<student>/<lesson>/ of the chosen lessons, without following links.

    The SUBMISSIONS folder itself is the instructor's choice and may be a link.
    """
    found = []
    for student_entry in _entries(submissions.resolve()):
        if student_entry.name.startswith("."):
            continue
        if student_entry.is_symlink():
            reason = f"the folder {shown(student_entry.name)} is a symbolic link"
            found += [_unreadable(student_entry.name, lesson, Status.INVALID, reason)
                      for lesson in lessons.values()]
            continue
        if not student_entry.is_dir(follow_symlinks=False):
            continue
        for lesson_entry in _entries(Path(student_entry.path)):
            lesson = lessons.get(lesson_entry.name)
            if lesson is None:
                continue
            if lesson_entry.is_symlink():
                reason = f"the folder {shown(lesson_entry.name)} is a symbolic link"
                found.append(_unreadable(student_entry.name, lesson, Status.INVALID, reason))
            elif not lesson_entry.is_dir(follow_symlinks=False):
                reason = f"{shown(lesson_entry.name)} is a file, not a folder of notebooks"
                found.append(_unreadable(student_entry.name, lesson, Status.INVALID, reason))
            else:
                found.append(Submission(student_entry.name, lesson.name,
                                        _match(Path(lesson_entry.path), lesson, max_bytes)))
    return found


def _entries(folder: Path) -> list[os.DirEntry]:
    with os.scandir(folder) as entries:
        return sorted(entries, key=lambda entry: entry.name)


def _unreadable(student: str, lesson: Lesson, status: Status, reason: str) -> Submission:
    return Submission(student, lesson.name, tuple(
        SubmittedNotebook(spec, None, problem=status, note=reason) for spec in lesson.notebooks))


def _match(folder: Path, lesson: Lesson, max_bytes: int) -> tuple[SubmittedNotebook, ...]:
    """Pair each expected notebook with a file of the folder."""
    entries = {entry.name: entry for entry in _entries(folder)}
    expected = {spec.filename for spec in lesson.notebooks}
    absent = [spec for spec in lesson.notebooks if spec.filename not in entries]
    others = [name for name in entries if name not in expected and not name.startswith(".")
              and name.lower().endswith(".ipynb")]
    stand_in = others[0] if len(absent) == 1 and len(others) == 1 else None
    matched = []
    for spec in lesson.notebooks:
        if spec.filename in entries:
            matched.append(_check_file(spec, entries[spec.filename], max_bytes, note=""))
        elif stand_in is not None:
            note = f"graded {shown(stand_in)}: no file named {spec.filename} was submitted"
            matched.append(_check_file(spec, entries[stand_in], max_bytes, note=note))
        else:
            matched.append(SubmittedNotebook(spec, None, problem=Status.MISSING,
                                             note=_missing_reason(spec, sorted(entries))))
    return tuple(matched)


def _missing_reason(spec: LessonNotebook, names: list[str]) -> str:
    reason = f"no file named {spec.filename} was submitted"
    if not names:
        return reason + "; the folder is empty"
    listed = ", ".join(shown(name) for name in names[:SHOWN_ENTRIES])
    more = f" and {len(names) - SHOWN_ENTRIES} more" if len(names) > SHOWN_ENTRIES else ""
    return f"{reason}; found {listed}{more}"


def _check_file(spec: LessonNotebook, entry: os.DirEntry, max_bytes: int,
                note: str) -> SubmittedNotebook:
    """The file to grade, or why it will not be read (without opening it)."""
    path = Path(entry.path)
    try:
        info = entry.stat(follow_symlinks=False)
        problem = _file_problem(entry.name, info, max_bytes)
    except OSError as error:
        problem = f"{shown(entry.name)} could not be read ({error.strerror})"
    if problem:
        return SubmittedNotebook(spec, None, problem=Status.INVALID, note=problem)
    return SubmittedNotebook(spec, path, size=info.st_size, note=note)


def _file_problem(name: str, info: os.stat_result, max_bytes: int) -> str:
    if stat.S_ISLNK(info.st_mode):
        return f"{shown(name)} is a symbolic link"
    if not stat.S_ISREG(info.st_mode):
        return f"{shown(name)} is not a regular file"
    if info.st_size > max_bytes:
        return _too_big(name, info.st_size, max_bytes)
    return ""


def _too_big(name: str, size: int, max_bytes: int) -> str:
    return (f"{shown(name)} is {size / 2**20:.1f} MiB; notebooks over {max_bytes / 2**20:g} MiB "
            "are not graded (--max-notebook-mb)")


def read_notebook(path: Path, max_bytes: int) -> NotebookNode:
    """Open, read and parse a submitted file, or raise InvalidSubmission saying why.

    Opened with O_NOFOLLOW (a link swapped in after discovery is still refused) and
    O_NONBLOCK (a FIFO cannot hang the grader); read up to the cap, never beyond.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise InvalidSubmission(f"{shown(path.name)} is a symbolic link") from None
        raise InvalidSubmission(f"{shown(path.name)} could not be read ({error.strerror})") \
            from None
    with os.fdopen(fd, "rb") as handle:
        problem = _file_problem(path.name, os.fstat(fd), max_bytes)
        if problem:
            raise InvalidSubmission(problem)
        raw = handle.read(max_bytes + 1)
    if len(raw) > max_bytes:  # it grew after the check
        raise InvalidSubmission(_too_big(path.name, len(raw), max_bytes))
    return parse_notebook(raw)


def parse_notebook(raw: bytes) -> NotebookNode:
    """A version-4 notebook from bytes, or InvalidSubmission with a one-line reason."""
    import nbformat  # on first use: a worker starts its first kernel before this import

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidSubmission("the file is not text (not a notebook)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidSubmission(f"the file is not valid JSON ({error.msg}, line {error.lineno})") \
            from None
    except RecursionError:
        raise InvalidSubmission("the file is JSON nested too deeply to be a notebook") from None
    if not isinstance(data, dict) or "cells" not in data or "nbformat" not in data:
        raise InvalidSubmission("the file is JSON but not a Jupyter notebook (no cells/nbformat)")
    if data.get("nbformat") != 4:
        raise InvalidSubmission(
            f"the notebook is nbformat version {data.get('nbformat')!r}; version 4 is required")
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except RecursionError:
        raise InvalidSubmission("the notebook is nested too deeply to be checked") from None
    except Exception as error:  # noqa: BLE001 - nbformat raises several kinds
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InvalidSubmission(f"the notebook does not follow the nbformat schema: {first}") \
            from None
    return nb


def student_folders(submissions: Path) -> list[str]:
    """The students found: every folder (or link) under SUBMISSIONS not starting with a dot."""
    return [entry.name for entry in _entries(submissions.resolve())
            if not entry.name.startswith(".")
            and (entry.is_symlink() or entry.is_dir(follow_symlinks=False))]


def absent(submissions: Path, lessons: dict[str, Lesson], students: list[str],
           found: list[Submission]) -> list[Submission]:
    """A ``missing`` submission for each of these students' lessons that has no folder.

    The reason names what the student's folder holds instead (a misnamed lesson folder, a
    notebook left at the top), or says that there is no folder for the student at all.
    """
    have = {(submission.student, submission.lesson) for submission in found}
    root = submissions.resolve()
    missing = []
    for student in students:
        folder = root / student
        for lesson in lessons.values():
            if (student, lesson.name) in have:
                continue
            if folder.is_symlink() or not folder.is_dir():
                reason = f"nothing submitted: no folder {shown(student)} in the submissions"
            else:
                names = [entry.name for entry in _entries(folder)
                         if not entry.name.startswith(".")]
                reason = f"nothing submitted: no folder {shown(lesson.name)}"
                if names:
                    listed = ", ".join(shown(name) for name in names[:SHOWN_ENTRIES])
                    more = f" and {len(names) - SHOWN_ENTRIES} more" \
                        if len(names) > SHOWN_ENTRIES else ""
                    reason += f"; found {listed}{more}"
                else:
                    reason += "; the student's folder is empty"
            missing.append(_unreadable(student, lesson, Status.MISSING, reason))
    return missing
