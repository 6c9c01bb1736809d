"""Late work: a due date per lesson, extensions per student, one penalty policy.

Declared once, as two fields of the request (request.py), each with its `course grade` option:
``--late-policy late.toml`` (the penalty and the due dates) and ``--extensions
extensions.csv`` (``student,lesson,days``; lesson ``*``: every lesson)::

    [penalty]
    method = "per-day"    # "none", "per-day", or "zero" (nbgrader's: the whole score)
    percent_per_day = 10  # of the score, for each day or part of a day late
    cap_percent = 50      # never more than this
    grace_minutes = 15    # later than the due date by less than this: no penalty

    [due]                 # a time without an offset is UTC
    "00_setup" = 2026-03-02T23:59:00Z

Everything is kept where nbgrader keeps it, so that formgrader, ``nbgrader export`` and
nbgrader's own feedback see it: the due date is the gradebook assignment's ``duedate``, an
extension the submission's ``extension`` (what ``grant_extension`` sets), the time submitted
the submission's ``timestamp`` (from ``timestamp.txt``), and each notebook's penalty its
``late_submission_penalty``, computed by an nbgrader ``LateSubmissionPlugin``
(late_plugin.py) from the notebook's score. Like nbgrader's ``AssignLatePenalties``, every
re-grade first resets the penalty and then computes it from the scores as they are now
(hand grades included): a penalty is never taken from an already penalised score.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import tomllib

METHODS = ("none", "per-day", "zero")
ANY_LESSON = "*"


@dataclass(frozen=True)
class PenaltyRule:
    """How many points a late notebook loses, from its score and how late it came."""

    method: str = "none"
    percent_per_day: float = 0.0
    cap_percent: float = 100.0
    grace_minutes: float = 0.0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"--late-policy: [penalty] method must be one of "
                             f"{', '.join(METHODS)}, got {self.method!r}.")
        for name in ("percent_per_day", "cap_percent", "grace_minutes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"--late-policy: [penalty] {name} must be a number ≥ 0, "
                                 f"got {value!r}.")
        if self.cap_percent > 100:
            raise ValueError(f"--late-policy: [penalty] cap_percent must be at most 100, got "
                             f"{self.cap_percent!r}.")

    def penalty(self, score: float, seconds_late: float) -> float:
        """Points taken off a notebook scoring ``score``, ``seconds_late`` past its due date
        (extension included): between 0 and the score."""
        if seconds_late <= self.grace_minutes * 60 or self.method == "none" or score <= 0:
            return 0.0
        if self.method == "zero":
            return score
        days = math.ceil(seconds_late / 86400)  # a day begun counts as a day
        percent = min(self.cap_percent, days * self.percent_per_day)
        return min(score, round(score * percent / 100, 6))


@dataclass(frozen=True)
class LatePolicy:
    """``--late-policy``: the penalty rule and each lesson's due date (naive UTC, as nbgrader)."""

    rule: PenaltyRule = PenaltyRule()
    due: tuple[tuple[str, datetime], ...] = ()
    source: str = ""  # the file it was read from, for messages

    def due_date(self, lesson: str) -> datetime | None:
        return dict(self.due).get(lesson)

    def check_lessons(self, lessons: list[str]) -> None:
        """ValueError naming a due date given for a lesson the course does not have."""
        unknown = [name for name, _ in self.due if name not in lessons]
        if unknown:
            raise ValueError(f"--late-policy {self.source!r}: [due] names "
                             f"{', '.join(map(repr, unknown))}, not a lesson of this course "
                             f"(lessons: {', '.join(lessons)}).")


@dataclass(frozen=True)
class Extensions:
    """``--extensions``: extra days per student, per lesson or for every lesson."""

    days: dict[tuple[str, str], float] = field(default_factory=dict)  # (student, lesson|*)

    def granted(self, student: str, lesson: str) -> float:
        """Days granted to this student for this lesson (a lesson's own line wins over '*')."""
        return self.days.get((student, lesson), self.days.get((student, ANY_LESSON), 0.0))


NO_LATE_POLICY = LatePolicy()
NO_EXTENSIONS = Extensions()


def read_policy(path: str | Path) -> LatePolicy:
    """The --late-policy TOML file; ValueError naming the file and what is wrong."""
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"--late-policy {str(path)!r} cannot be read ({error.strerror}).") \
            from None
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"--late-policy {str(path)!r} is not valid TOML ({error}).") from None
    unknown = set(data) - {"penalty", "due"}
    if unknown:
        raise ValueError(f"--late-policy {str(path)!r}: unknown table(s) "
                         f"{', '.join(sorted(unknown))}; allowed: [penalty], [due].")
    penalty = data.get("penalty", {})
    allowed = {"method", "percent_per_day", "cap_percent", "grace_minutes"}
    if set(penalty) - allowed:
        raise ValueError(f"--late-policy {str(path)!r}: unknown [penalty] key(s) "
                         f"{', '.join(sorted(set(penalty) - allowed))}; allowed: "
                         f"{', '.join(sorted(allowed))}.")
    due = tuple((lesson, _utc(lesson, when, path)) for lesson, when in data.get("due", {}).items())
    return LatePolicy(PenaltyRule(**penalty), due, str(path))


def _utc(lesson: str, when: object, path: str | Path) -> datetime:
    """A due date as nbgrader stores it: naive UTC (a time without an offset is UTC)."""
    parsed = when if isinstance(when, datetime) else _parsed(when)
    if parsed is None:
        raise ValueError(f"--late-policy {str(path)!r}: [due] {lesson!r} must be a date and "
                         f"time such as 2026-03-02T23:59:00Z, got {when!r}.")
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(timezone.utc).replace(tzinfo=None)
    return parsed


def _parsed(text: object) -> datetime | None:
    """A date and time written as text (TOML's own dates need no parsing), or None."""
    try:
        return datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None


def read_extensions(path: str | Path) -> Extensions:
    """The --extensions CSV (student,lesson,days); ValueError naming the line otherwise."""
    path = Path(path)
    try:
        handle = path.open(newline="", encoding="utf-8-sig")
    except OSError as error:
        raise ValueError(f"--extensions {str(path)!r} cannot be read ({error.strerror}).") \
            from None
    days: dict[tuple[str, str], float] = {}
    with handle:
        reader = csv.DictReader(handle)
        if [name.strip() for name in reader.fieldnames or ()] != ["student", "lesson", "days"]:
            raise ValueError(f"--extensions {str(path)!r} needs the columns student,lesson,days "
                             f"(lesson * for every lesson), got {reader.fieldnames}.")
        for number, line in enumerate(reader, start=2):
            student, lesson = (line["student"] or "").strip(), (line["lesson"] or "").strip()
            try:
                granted = float(line["days"] or "")
            except ValueError:
                granted = -1.0
            if not student or not lesson or not granted >= 0 or math.isinf(granted):
                raise ValueError(f"--extensions {str(path)!r}, line {number}: needs a student, "
                                 f"a lesson (or *) and days ≥ 0, got {dict(line)}.")
            if (student, lesson) in days:
                raise ValueError(f"--extensions {str(path)!r}, line {number}: {student!r} "
                                 f"{lesson!r} is listed twice.")
            days[(student, lesson)] = granted
    return Extensions(days)


def seconds_late(submitted: datetime | None, due: datetime | None,
                 extension_days: float) -> float:
    """How long after its due date (extension included) a submission came; 0 when on time or
    when there is no due date or no time (nbgrader's ``total_seconds_late``)."""
    if submitted is None or due is None:
        return 0.0
    return max(0.0, (submitted - due - timedelta(days=extension_days)).total_seconds())
