"""The grade table: one :class:`Row` per student and lesson, as CSV, JSON and text.

A row exists for every student on the roster and every student found in the submissions,
for every lesson graded: a student who submitted nothing for a lesson gets a ``missing`` row
that says what was found instead, if anything. Each exercise has its own column (its
``grade_id``), holding the score that counts (a hand score given in formgrader where there
is one); a written answer not graded yet is left blank. Every row carries the run's seed, the
one the hidden checks drew their inputs from (``course grade --seed`` repeats a run).
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from .records import Execution, Status, SubmissionResult

FIXED_COLUMNS = ("student", "name", "lesson", "score", "max_score", "penalty", "status", "reason",
                 "seed", "review")


@dataclass(frozen=True)
class Row:
    """One line of the grade table: a student's lesson."""

    student: str
    lesson: str
    score: float
    max_score: float
    status: Status
    reason: str
    seed: int | None = None
    # (grade_id, score that counts) for each exercise that has a score, in the lesson's order
    exercises: tuple[tuple[str, float], ...] = ()
    name: str = ""  # "Last, First" from the roster, where the student is on it
    penalty: float = 0.0  # points the late policy took off (late.py); score is after it
    review: str = ""  # graded, but its code reaches into the probe's reach: a person judges
    execution: Execution = Execution.ALL  # which run gave the scores (grades.json only)

    @classmethod
    def from_result(cls, result: SubmissionResult, seed: int | None = None,
                    name: str = "") -> Row:
        scored = tuple((item.grade_id, item.awarded) for item in result.items
                       if item.awarded is not None)
        return cls(result.student, result.lesson, result.score, result.max_score, result.status,
                   result.reason, seed, scored, name, result.penalty, result.review,
                   result.execution)

    def as_dict(self) -> dict:
        """The row as JSON-ready data (exercise scores keyed by grade_id)."""
        return {"student": self.student, "name": self.name, "lesson": self.lesson,
                "score": self.score, "max_score": self.max_score, "penalty": self.penalty,
                "status": self.status.value,
                "reason": self.reason, "seed": self.seed, "exercises": dict(self.exercises),
                "review": self.review, "execution": self.execution.value}


def exercise_columns(lesson_exercises: dict[str, list[str]]) -> list[str]:
    """One column per exercise of the lessons graded, lesson by lesson, in notebook order."""
    return [grade_id for grade_ids in lesson_exercises.values() for grade_id in grade_ids]


def write_csv(path: Path, rows: list[Row], columns: list[str] | None = None) -> None:
    """grades.csv: the fixed columns, then one per exercise (``columns``, or those seen)."""
    if columns is None:
        columns = list(dict.fromkeys(grade_id for row in rows for grade_id, _ in row.exercises))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*FIXED_COLUMNS, *columns])
        writer.writeheader()
        for row in rows:
            line = {"student": row.student, "name": row.name, "lesson": row.lesson,
                    "score": f"{row.score:g}", "max_score": f"{row.max_score:g}",
                    "penalty": f"{row.penalty:g}",
                    "status": row.status.value, "reason": row.reason,
                    "seed": "" if row.seed is None else str(row.seed), "review": row.review}
            line.update({grade_id: f"{score:g}" for grade_id, score in row.exercises})
            writer.writerow(line)


def read_csv(path: Path) -> list[Row]:
    """The rows of a grades.csv written by :func:`write_csv`."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        exercise_names = [name for name in reader.fieldnames or () if name not in FIXED_COLUMNS]
        return [Row(line["student"], line["lesson"], float(line["score"]),
                    float(line["max_score"]), Status(line["status"]), line["reason"],
                    int(line["seed"]) if line["seed"] else None,
                    tuple((name, float(line[name])) for name in exercise_names if line[name]),
                    line["name"], float(line.get("penalty") or 0), line.get("review") or "")
                for line in reader]


def write_json(path: Path, rows: list[Row], seed: int | None) -> None:
    path.write_text(as_json(rows, seed) + "\n", encoding="utf-8")


def as_json(rows: list[Row], seed: int | None, **extra) -> str:
    return json.dumps({"seed": seed, **extra, "rows": [row.as_dict() for row in rows]},
                      indent=2, ensure_ascii=False)


def format_table(rows: list[Row]) -> str:
    header = ("student", "lesson", "score", "max", "status", "reason")
    lines = [(r.student, r.lesson, f"{r.score:g}", f"{r.max_score:g}", r.status.value,
              r.reason[:80] + ("…" if len(r.reason) > 80 else "")) for r in rows]
    widths = [max(len(str(x)) for x in column) for column in zip(header, *lines, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*header), fmt.format(*("-" * w for w in widths)),
                      *(fmt.format(*line) for line in lines)])
