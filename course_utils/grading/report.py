"""The grade table: one :class:`Row` per student and lesson, as CSV and as text."""
from __future__ import annotations

import csv
from dataclasses import dataclass, fields
from pathlib import Path

from .records import Status, SubmissionResult


@dataclass(frozen=True)
class Row:
    """One line of the grade table: a student's lesson."""

    student: str
    lesson: str
    score: float
    max_score: float
    status: Status
    reason: str

    @classmethod
    def from_result(cls, result: SubmissionResult) -> Row:
        return cls(result.student, result.lesson, result.score, result.max_score, result.status,
                   result.reason)

    def as_csv(self) -> dict[str, str]:
        return {"student": self.student, "lesson": self.lesson, "score": f"{self.score:g}",
                "max_score": f"{self.max_score:g}", "status": self.status.value,
                "reason": self.reason}


CSV_COLUMNS = tuple(field.name for field in fields(Row))


def write_csv(path: Path, rows: list[Row]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(row.as_csv() for row in rows)


def read_csv(path: Path) -> list[Row]:
    """The rows of a grades.csv written by :func:`write_csv`."""
    with path.open(newline="", encoding="utf-8") as handle:
        return [Row(line["student"], line["lesson"], float(line["score"]),
                    float(line["max_score"]), Status(line["status"]), line["reason"])
                for line in csv.DictReader(handle)]


def format_table(rows: list[Row]) -> str:
    header = ("student", "lesson", "score", "max", "status", "reason")
    lines = [(r.student, r.lesson, f"{r.score:g}", f"{r.max_score:g}", r.status.value,
              r.reason[:80] + ("…" if len(r.reason) > 80 else "")) for r in rows]
    widths = [max(len(str(x)) for x in column) for column in zip(header, *lines, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*header), fmt.format(*("-" * w for w in widths)),
                      *(fmt.format(*line) for line in lines)])
