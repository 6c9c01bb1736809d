"""What a re-grade changed: every run writes, beside grades.csv, which scores changed since
the last run, old and new, and why.

Each run keeps what each submission's scores rest on in ``grades-basis.json``: the scores
per exercise (and which were given by hand), the late penalty, the SHA-256 of the submitted
notebooks, a hash of the checks that graded them (the lesson's checks and probes, and its
graded cells in ``solutions/``) and the seed. The next run compares its results with it and
writes ``grades-changes.csv`` (``student,lesson,column,old,new,why``: a line per exercise
whose score changed, for the penalty, and for the total), naming every cause it finds: a new
submission, a changed check, a hand grade, the penalty, hidden inputs drawn from another
seed. Submissions this run did not grade keep their earlier basis.
"""
from __future__ import annotations

import csv
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from .records import SubmissionResult
from .structure import Lesson

BASIS_FILE = "grades-basis.json"
CHANGES_FILE = "grades-changes.csv"
COLUMNS = ("student", "lesson", "column", "old", "new", "why")
SHORT = 12  # hex digits of a hash shown in a reason
SHARED_CHECKS = ("checks/*.py", "checks/distributed/*.py", "probe/*.py")


@dataclass(frozen=True)
class Change:
    student: str
    lesson: str
    column: str  # an exercise's grade_id, "penalty" or "score"
    old: float | None  # None: not graded before
    new: float | None  # None: a written answer not graded yet
    why: str


@dataclass(frozen=True)
class ChangeSummary:
    """What `course grade` says of the comparison, in one line."""

    changes: list[Change]
    compared: int  # submissions graded before and now
    first: int     # submissions graded for the first time
    path: Path

    @property
    def line(self) -> str:
        scores = [change for change in self.changes if change.column == "score"
                  and change.old is not None]
        students = len({change.student for change in scores})
        text = (f"Changes since the last run: {len(scores)} of {self.compared} lesson score(s) "
                f"changed, for {students} student(s)")
        if self.first:
            text += f"; {self.first} submission(s) graded for the first time"
        return f"{text} ({self.path})."


def checks_hash(root: Path, lesson: Lesson) -> str:
    """The version of what grades ``lesson``: its checks' and probes' source (the course's
    shared ones and ``checks/lessonNN/``) and its graded cells in solutions/."""
    package = root / "course_utils"
    number = re.match(r"\d+", lesson.name)
    patterns = [*SHARED_CHECKS, *([f"checks/lesson{number.group()}/**/*.py"] if number else [])]
    digest = hashlib.sha256()
    for path in sorted({path for pattern in patterns for path in package.glob(pattern)}):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    for notebook in lesson.notebooks:
        for item in notebook.items:
            digest.update(f"{notebook.name}/{item.grade_id}:{item.points}\0{item.source_source}"
                          .encode())
    return digest.hexdigest()


def submission_checksum(folder: Path) -> str:
    """The SHA-256 of the notebooks in a submitted folder (names and contents); "" if none."""
    notebooks = sorted(folder.glob("*.ipynb")) if folder.is_dir() else []
    if not notebooks:
        return ""
    digest = hashlib.sha256()
    for path in notebooks:
        if path.is_file() and not path.is_symlink():
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def basis_of(result: SubmissionResult, checksum: str, checks: str, seed: int) -> dict:
    """What one submission's scores rest on, as kept in grades-basis.json."""
    return {"score": result.score, "penalty": result.penalty, "status": result.status.value,
            "checksum": checksum, "checks": checks, "seed": seed,
            "exercises": {item.grade_id: {"score": item.awarded, "hand": item.hand_score}
                          for item in result.items}}


def compare(key: tuple[str, str], old: dict | None, new: dict) -> list[Change]:
    """The changes between two bases of one submission (nothing when none changed)."""
    student, lesson = key
    if old is None:
        return [Change(student, lesson, "score", None, new["score"], "first graded")]
    causes = []
    if old["checksum"] != new["checksum"]:
        causes.append(f"new submission (sha256 {old['checksum'][:SHORT] or 'none'} → "
                      f"{new['checksum'][:SHORT] or 'none'})")
    if old["checks"] != new["checks"]:
        causes.append(f"checks changed ({old['checks'][:SHORT]} → {new['checks'][:SHORT]})")
    if old["status"] != new["status"]:
        causes.append(f"status {old['status']} → {new['status']}")
    changes = []
    for grade_id in dict.fromkeys([*new["exercises"], *old["exercises"]]):
        before = old["exercises"].get(grade_id, {"score": None, "hand": None})
        after = new["exercises"].get(grade_id, {"score": None, "hand": None})
        if before["score"] == after["score"]:
            continue
        why = list(causes)
        if before["hand"] != after["hand"]:
            why.append(f"hand grade ({_shown(before['hand'])} → {_shown(after['hand'])})")
        if not why:
            why.append(_unexplained(old["seed"], new["seed"]))
        changes.append(Change(student, lesson, grade_id, before["score"], after["score"],
                              "; ".join(why)))
    if old["penalty"] != new["penalty"]:
        changes.append(Change(student, lesson, "penalty", old["penalty"], new["penalty"],
                              "late penalty: recomputed from the due date, extension, policy "
                              "and score"))
    if old["score"] != new["score"]:
        why = list(dict.fromkeys(part for change in changes for part in change.why.split("; ")))
        changes.append(Change(student, lesson, "score", old["score"], new["score"],
                              "; ".join(why) or _unexplained(old["seed"], new["seed"])))
    return changes


def _unexplained(old_seed: int, new_seed: int) -> str:
    if old_seed != new_seed:
        return f"hidden inputs drawn anew (seed {old_seed} → {new_seed})"
    return "same submission, checks and seed: the run itself differed (time limits under load?)"


def _shown(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def record_changes(out: Path, root: Path, lessons: dict[str, Lesson],
                   results: list[SubmissionResult], seed: int) -> ChangeSummary:
    """Compare this run's results with the last run's basis; write grades-changes.csv and the
    new grades-basis.json (earlier entries of submissions not graded now are kept)."""
    basis_path = out / BASIS_FILE
    try:
        earlier = json.loads(basis_path.read_text(encoding="utf-8"))["submissions"]
    except (OSError, ValueError, KeyError, TypeError):
        earlier = {}  # no earlier run here (or a file from no known version): all is new
    versions = {name: checks_hash(root, lesson) for name, lesson in lessons.items()}
    changes, compared, first, current = [], 0, 0, dict(earlier)
    for result in results:
        key = f"{result.student}/{result.lesson}"
        folder = out / "submitted" / result.student / result.lesson
        now = basis_of(result, submission_checksum(folder), versions[result.lesson], seed)
        before = earlier.get(key)
        compared += before is not None
        first += before is None
        changes += compare((result.student, result.lesson), before, now)
        current[key] = now
    changes.sort(key=lambda change: (change.student, change.lesson))
    path = out / CHANGES_FILE
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for change in changes:
            writer.writerow([change.student, change.lesson, change.column, _cell(change.old),
                             _cell(change.new), change.why])
    basis_path.write_text(json.dumps({"version": 1, "seed": seed, "submissions": current},
                                     indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return ChangeSummary(changes, compared, first, path)


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def read_changes(path: Path) -> list[Change]:
    """The lines of a grades-changes.csv."""
    with path.open(newline="", encoding="utf-8") as handle:
        return [Change(line["student"], line["lesson"], line["column"],
                       float(line["old"]) if line["old"] else None,
                       float(line["new"]) if line["new"] else None, line["why"])
                for line in csv.DictReader(handle)]
