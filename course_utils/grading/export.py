"""``course export``: grades.csv in the form a learning platform imports.

``--format canvas`` writes Canvas's gradebook import CSV: the columns ``Student`` ("Last,
First"), ``ID``, ``SIS User ID``, ``SIS Login ID``, ``Section``, then one column per lesson
(or per exercise, ``--by exercise``), and a ``Points Possible`` row under the header. Canvas
matches a row to a student by ``ID`` (Canvas's own number), else ``SIS User ID``, else ``SIS
Login ID``, and a column to an assignment by its name, ``Name (assignment id)`` as Canvas
exports it; a column it does not know becomes a new assignment.

The grader knows neither Canvas's user numbers nor its assignment ids, so the robust route is
``--template``: the CSV exported from the course's Canvas gradebook. Its students are kept as
Canvas wrote them, each matched to a graded student whose id is its ``SIS User ID`` or ``SIS
Login ID`` (or whose roster email is its ``SIS Login ID``), and a lesson's column takes the
template's name for it, assignment id included, where the template has one. Without a
template the student's id goes into ``SIS User ID`` and ``SIS Login ID``.

``--format csv`` writes a plain table keyed by the roster's ids: ``student,name``, a column
per lesson or exercise, ``total`` and ``total_possible``. Scores are the ones that count (hand
grades, late penalty taken off); in ``--by exercise`` a lesson with a penalty gets a ``late
penalty`` column of its own (negative, 0 points possible).
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import check_lessons
from .options import option
from .report import Row, read_csv
from .roster import RosterStudent, read_roster
from .structure import load_lesson

CANVAS_IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
TEMPLATE_IDENTITY = (*CANVAS_IDENTITY, "Integration ID")  # kept from a template when there
POINTS_POSSIBLE = "    Points Possible"  # as Canvas writes it, indented
CANVAS_ID = re.compile(r"^(?P<name>.*?)\s*\((?P<id>\d+)\)\s*$")


@dataclass(frozen=True)
class ExportRequest:
    """What ``course export`` writes, and from what."""

    root: Path  # the course: its lessons give each exercise's points
    out: Path = field(default=Path("grading-output"), metadata=option(
        flag="--out", metavar="FOLDER", read=Path,
        help="course grade's output folder, whose grades.csv is exported (default: "
             "grading-output)"))
    format: str = field(default="canvas", metadata=option(
        flag="--format", metavar="FORMAT", choices=("canvas", "csv"),
        help="canvas: Canvas's gradebook import CSV (default); csv: a plain table keyed by "
             "the roster's ids"))
    by: str = field(default="lesson", metadata=option(
        flag="--by", metavar="COLUMNS", choices=("lesson", "exercise"),
        help="one column per lesson (default) or per exercise"))
    template: Path | None = field(default=None, metadata=option(
        flag="--template", metavar="CANVAS_CSV", read=Path,
        help="the CSV exported from your Canvas gradebook: its students and assignment ids "
             "are used (the robust route)"))
    roster: tuple[RosterStudent, ...] = field(default=(), metadata=option(
        flag="--roster", metavar="STUDENTS_CSV", read=lambda path: tuple(read_roster(Path(path))),
        help="nbgrader's student CSV: a row for every student on it, emails to match Canvas's "
             "SIS Login ID"))
    target: Path | None = field(default=None, metadata=option(
        flag="--to", metavar="FILE", read=Path,
        help="where to write (default: OUT/grades-FORMAT.csv)"))

    def __post_init__(self) -> None:
        if self.format not in ("canvas", "csv") or self.by not in ("lesson", "exercise"):
            raise ValueError(f"course export: --format must be canvas or csv and --by lesson "
                             f"or exercise, got {self.format!r} and {self.by!r}.")

    @property
    def path(self) -> Path:
        return self.target or self.out / f"grades-{self.format}.csv"


@dataclass(frozen=True)
class Column:
    title: str
    points: float
    lesson: str
    grade_id: str = ""  # "" for a lesson's total; "-penalty" for its late penalty


@dataclass(frozen=True)
class Exported:
    """What an export wrote, and what it could not place."""

    path: Path
    students: int
    unmatched: list[str]  # graded students the template has no row for
    waiting: list[str]    # "student lesson": written answers still to grade (not counted)


def export(request: ExportRequest) -> Exported:
    """Write the export; ValueError naming what is missing (no grades.csv, a bad template)."""
    grades = request.out / "grades.csv"
    if not grades.is_file():
        raise ValueError(f"course export: no {grades}: run `course grade` first (with the same "
                         "--out).")
    rows = read_csv(grades)
    columns = _columns(request, rows)
    scores = {row.student: _scores(row, request.by) for row in rows}
    names = {row.student: row.name for row in rows if row.name}
    names.update({student.id: student.display_name for student in request.roster})
    students = list(dict.fromkeys([*(student.id for student in request.roster),
                                   *(row.student for row in rows)]))
    waiting = [f"{row.student} {row.lesson}" for row in rows if "manual grading" in row.reason]
    request.path.parent.mkdir(parents=True, exist_ok=True)
    if request.format == "csv":
        _write_plain(request.path, students, names, columns, scores)
        return Exported(request.path, len(students), [], waiting)
    if request.template is not None:
        placed, unmatched = _write_from_template(request, columns, scores)
        return Exported(request.path, placed, unmatched, waiting)
    with request.path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*CANVAS_IDENTITY, *(column.title for column in columns)])
        writer.writerow([POINTS_POSSIBLE, "", "", "", "", *(_number(c.points) for c in columns)])
        for student in students:
            writer.writerow([names.get(student, student), "", student, student, "",
                             *_cells(columns, scores.get(student, {}))])
    return Exported(request.path, len(students), [], waiting)


def _columns(request: ExportRequest, rows: list[Row]) -> list[Column]:
    """The lessons (or their exercises) in grades.csv, in course order."""
    graded = {row.lesson for row in rows}
    lessons = [name for name in check_lessons(request.root, None) if name in graded]
    penalised = {row.lesson for row in rows if row.penalty}
    columns = []
    for name in lessons:
        lesson = load_lesson(request.root, name)
        items = [item for notebook in lesson.notebooks for item in notebook.items]
        if request.by == "lesson":
            columns.append(Column(name, sum(item.points for item in items), name))
            continue
        columns += [Column(f"{name}: {item.grade_id}", item.points, name, item.grade_id)
                    for item in items]
        if name in penalised:
            columns.append(Column(f"{name}: late penalty", 0.0, name, "-penalty"))
    return columns


def _scores(row: Row, by: str) -> dict[tuple[str, str], float]:
    """A row's scores by (lesson, grade_id): "" the lesson's total, "-penalty" its penalty."""
    if by == "lesson":
        return {(row.lesson, ""): row.score}
    scores = {(row.lesson, grade_id): score for grade_id, score in row.exercises}
    if row.penalty:
        scores[(row.lesson, "-penalty")] = -row.penalty
    return scores


def _cells(columns: list[Column], scores: dict[tuple[str, str], float]) -> list[str]:
    """Blank where there is no score (a written answer not graded, a lesson not graded)."""
    return [_number(scores[key]) if (key := (c.lesson, c.grade_id)) in scores else ""
            for c in columns]


def _write_plain(path: Path, students: list[str], names: dict[str, str], columns: list[Column],
                 scores: dict[str, dict[tuple[str, str], float]]) -> None:
    possible = sum(column.points for column in columns)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "name", *(c.title for c in columns), "total",
                         "total_possible"])
        for student in students:
            own = scores.get(student, {})
            writer.writerow([student, names.get(student, ""), *_cells(columns, own),
                             _number(sum(own.values())), _number(possible)])


def _write_from_template(request: ExportRequest, columns: list[Column],
                         scores: dict[str, dict[tuple[str, str], float]]
                         ) -> tuple[int, list[str]]:
    """Canvas's own rows and assignment names, with the course's scores filled in."""
    template = request.template
    try:
        with template.open(newline="", encoding="utf-8-sig") as handle:
            lines = list(csv.reader(handle))
    except OSError as error:
        raise ValueError(f"--template {str(template)!r} cannot be read ({error.strerror}).") \
            from None
    header = [name.strip() for name in lines[0]] if lines else []
    absent = [name for name in ("Student", "SIS User ID", "SIS Login ID") if name not in header]
    if absent:
        raise ValueError(f"--template {str(template)!r} is not a Canvas gradebook export: no "
                         f"column {', '.join(absent)} (Canvas: Grades > Export > Export "
                         "Entire Gradebook).")
    kept = [name for name in TEMPLATE_IDENTITY if name in header]
    titles = _canvas_titles(header)
    named = [titles.get(column.title, column.title) for column in columns]
    emails = {student.email: student.id for student in request.roster if student.email}
    placed, matched = 0, set()
    with request.path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*kept, *named])
        writer.writerow([POINTS_POSSIBLE, *[""] * (len(kept) - 1),
                         *(_number(c.points) for c in columns)])
        for line in lines[1:]:
            fields = dict(zip(header, line, strict=False))
            if fields.get("Student", "").strip() == POINTS_POSSIBLE.strip():
                continue
            sis_user, sis_login = fields.get("SIS User ID", ""), fields.get("SIS Login ID", "")
            student = next((who for who in (sis_user, sis_login, emails.get(sis_login))
                            if who and who in scores), None)
            if not (fields.get("ID") or sis_user or sis_login):
                continue  # not a student: a row of Canvas's own (manual posting, ...)
            own = scores.get(student, {}) if student else {}
            writer.writerow([fields.get(name, "") for name in kept] + _cells(columns, own))
            placed += 1
            matched.add(student)
    return placed, sorted(set(scores) - matched)


def _canvas_titles(header: list[str]) -> dict[str, str]:
    """The template's assignment columns by their name without Canvas's id: "00_setup" →
    "00_setup (12345)"."""
    return {match.group("name"): title for title in header
            if (match := CANVAS_ID.match(title)) is not None}


def _number(value: float) -> str:
    return f"{value:g}"
