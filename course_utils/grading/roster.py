"""The class list: nbgrader's student CSV (``id,first_name,last_name``, optional ``email``).

The same file ``nbgrader db student import`` reads. ``course grade --roster`` and ``course
gradebook --roster`` put the names into the gradebook, so formgrader lists "Last, First",
and ``grades.csv`` gets a row for every student on it, submitted or not.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

REQUIRED = ("id", "first_name", "last_name")


@dataclass(frozen=True)
class RosterStudent:
    id: str
    first_name: str
    last_name: str
    email: str | None = None

    @property
    def display_name(self) -> str:
        """As formgrader shows a student: "Last, First"."""
        return ", ".join(part for part in (self.last_name, self.first_name) if part)


def read_roster(path: Path) -> list[RosterStudent]:
    """The students of a roster CSV; ValueError naming the line and the problem otherwise."""
    try:
        handle = path.open(newline="", encoding="utf-8-sig")  # a spreadsheet's BOM is fine
    except OSError as error:
        raise ValueError(f"--roster {str(path)!r} cannot be read ({error.strerror}).") from None
    with handle:
        reader = csv.DictReader(handle)
        header = [name.strip() for name in reader.fieldnames or ()]
        absent = [name for name in REQUIRED if name not in header]
        if absent:
            raise ValueError(f"--roster {str(path)!r} needs the columns id,first_name,last_name "
                             f"(optional email), as nbgrader's student CSV; missing: "
                             f"{', '.join(absent)}.")
        students: dict[str, RosterStudent] = {}
        for number, line in enumerate(reader, start=2):
            line = {(key or "").strip(): (value or "").strip() for key, value in line.items()}
            student_id = line["id"]
            if not student_id:
                raise ValueError(f"--roster {str(path)!r}, line {number}: empty id.")
            if "/" in student_id or student_id.startswith("."):
                raise ValueError(f"--roster {str(path)!r}, line {number}: {student_id!r} cannot "
                                 "be a folder name.")
            if student_id in students:
                raise ValueError(f"--roster {str(path)!r}, line {number}: {student_id!r} is "
                                 "listed twice.")
            students[student_id] = RosterStudent(student_id, line["first_name"],
                                                 line["last_name"], line.get("email") or None)
    return list(students.values())
