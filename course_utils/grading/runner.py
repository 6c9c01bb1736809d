"""``course grade``: grade a folder of submissions, in parallel, crash-safely."""
from __future__ import annotations

import csv
import multiprocessing
import os
import secrets
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures import TimeoutError as FuturesTimeout
from dataclasses import asdict, dataclass
from pathlib import Path

from ..paths import check_lessons, lesson_notebooks
from . import autograded, feedback, gradebook, worker
from .session import Limits, unshare_prefix
from .structure import grade_items

FAILED_STATUSES = {"invalid", "missing", "kernel-died", "timeout", "output-limit", "error"}


@dataclass
class Row:
    """One line of the grade table: a student's lesson."""

    student: str
    lesson: str
    score: float
    max_score: float
    status: str
    reason: str


def discover(submissions: Path, lessons: list[str]) -> list[tuple[str, str, Path]]:
    """(student, lesson, folder) for SUBMISSIONS/<student>/<lesson>/, lessons filtered."""
    found = []
    for student_dir in sorted(p for p in submissions.iterdir() if p.is_dir()):
        for lesson_dir in sorted(p for p in student_dir.iterdir() if p.is_dir()):
            if lesson_dir.name in lessons:
                found.append((student_dir.name, lesson_dir.name, lesson_dir))
    return found


def _job(root: Path, student: str, lesson: str, folder: Path, limits: Limits, seed: int,
         threads: int) -> dict:
    notebooks = [{"name": source.stem, "source": str(source),
                  "release": str(root / "notebooks" / lesson / source.name),
                  "submitted": str(folder / source.name)}
                 for source in lesson_notebooks(root, lesson)]
    return {"student": student, "lesson": lesson, "notebooks": notebooks,
            "limits": asdict(limits), "seed": seed, "threads": threads}


def _missing_notebooks(job: dict) -> dict | None:
    """A zero result when a notebook of the lesson was not submitted, else None."""
    missing = [nb["name"] + ".ipynb" for nb in job["notebooks"] if not Path(nb["submitted"]).exists()]
    if not missing:
        return None
    return _failed(job, "missing", f"no file named {', '.join(missing)} was submitted",
                   message="not submitted")


def run_all(work: list[dict], jobs: int, while_running=lambda: None) -> list[dict]:
    """Grade every job in ``jobs`` worker processes; a worker that fails costs one row only.

    Workers are long-lived (they import the checks once) and started with "spawn", so
    nothing of this process's state leaks into them. Each enforces its submission's time
    limit on its kernel; the backstop here only catches a worker that itself hangs.
    ``while_running`` is called once the work is handed out (the parent's own chores).
    """
    results: list[dict | None] = [None] * len(work)
    pending = {}
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        # Biggest submissions first, so no worker is left with a long one at the end.
        for index in sorted(range(len(work)), key=lambda i: -_size(work[i])):
            job = work[index]
            results[index] = _missing_notebooks(job)
            if results[index] is None:
                pending[pool.submit(worker.run_job, job)] = index
        while_running()
        backstop = time.monotonic() + sum(_backstop(work[i]) for i in pending.values()) / jobs + 60
        try:
            for future in as_completed(pending, timeout=max(1.0, backstop - time.monotonic())):
                index = pending[future]
                try:
                    results[index] = future.result()
                except Exception as error:  # noqa: BLE001 - one broken worker, one failed row
                    results[index] = _failed(work[index], "error",
                                             f"the grader failed on this submission: {error!r}")
        except FuturesTimeout:
            for future, index in pending.items():
                if results[index] is None:
                    future.cancel()
                    results[index] = _failed(work[index], "timeout",
                                             "grading did not finish within the backstop")
            for process in list(pool._processes.values()):  # the hung worker and its peers
                process.kill()
    return results


def _size(job: dict) -> int:
    """Bytes submitted: a cheap stand-in for how long a submission takes to run."""
    return sum(Path(nb["submitted"]).stat().st_size for nb in job["notebooks"]
               if Path(nb["submitted"]).exists())


def _backstop(job: dict) -> float:
    limits = job["limits"]
    return limits["submission_timeout"] + limits["startup_timeout"]


def _failed(job: dict, status: str, reason: str, message: str | None = None) -> dict:
    """A result giving every graded cell of the lesson 0, with the reason."""
    notebooks = []
    for nb in job["notebooks"]:
        items = grade_items(Path(nb["source"]), Path(nb["release"]))
        notebooks.append({"name": nb["name"], "status": status, "reason": reason, "outputs": {},
                          "items": [worker.item_result(item, 0.0, message or reason)
                                    for item in items]})
    return {"student": job["student"], "lesson": job["lesson"], "notebooks": notebooks}


def to_row(result: dict) -> Row:
    items = [item for nb in result["notebooks"] for item in nb["items"]]
    score = sum(item["score"] or 0.0 for item in items)
    max_score = sum(item["points"] for item in items)
    statuses = [nb["status"] for nb in result["notebooks"]]
    status = next((s for s in statuses if s != "graded"), "graded")
    reason = "; ".join(nb["reason"] for nb in result["notebooks"] if nb["reason"])
    if status == "graded" and any(item["score"] is None for item in items):
        reason = "written answers need manual grading"
    return Row(result["student"], result["lesson"], score, max_score, status, reason)


def _folders_to_hide(root: Path, out: Path, submissions: Path) -> list[str]:
    """Solutions, history, gradebook and submissions: unless the kernel itself needs them."""
    needed = [Path(sys.prefix).resolve(), Path(__file__).resolve().parents[1],
              Path(tempfile.gettempdir()).resolve()]
    hide = []
    for folder in (root / "solutions", root / ".git", out, submissions):
        folder = folder.resolve()
        if folder.is_dir() and not any(path == folder or folder in path.parents
                                       for path in needed):
            hide.append(str(folder))
    return hide


def grade(root: Path, submissions: Path, out: Path, *, lessons: list[str] | None = None,
          db_url: str | None = None, jobs: int = 1, limits: Limits | None = None,
          seed: int | None = None, sandbox: bool = True) -> list[Row]:
    """Grade every submission; return the rows.

    Writes the gradebook, ``grades.csv``, ``feedback/<student>/<lesson>.html`` and
    ``autograded/<student>/<lesson>/`` (for nbgrader's formgrader) under ``out``.
    """
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}.")
    if not submissions.is_dir():
        raise ValueError(f"Submissions folder {str(submissions)!r} does not exist or is not a "
                         "folder; expected SUBMISSIONS/<student>/<lesson>/<notebook>.ipynb.")
    chosen = check_lessons(root, lessons)
    out.mkdir(parents=True, exist_ok=True)
    db_url = db_url or f"sqlite:///{(out / 'gradebook.db').resolve()}"
    limits = limits or Limits()
    if sandbox:
        limits.namespace_prefix = unshare_prefix()
        limits.hide = _folders_to_hide(root, out, submissions)
    if Path("/dev/nvidiactl").exists():
        limits.memory_mb = 0  # CUDA reserves more address space than any sensible cap
    run_seed = secrets.randbelow(2**31) if seed is None else seed
    threads = max(1, (os.cpu_count() or 1) // jobs)
    work = [_job(root, student, lesson, folder, limits, run_seed, threads)
            for student, lesson, folder in discover(submissions, chosen)]
    results = run_all(work, jobs, while_running=lambda: gradebook.register_lessons(
        db_url, {lesson: lesson_notebooks(root, lesson) for lesson in chosen}))
    # Every kernel is dead by now: nothing a student ran can touch what is written next.
    gradebook.record_all(db_url, results)
    rows = [to_row(result) for result in results]
    write_csv(out / "grades.csv", rows)
    feedback.write_all(out / "feedback", results)
    autograded.write_all(out / "autograded", work, results)
    return rows


def write_csv(path: Path, rows: list[Row]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "lesson", "score", "max_score", "status", "reason"])
        for row in rows:
            writer.writerow([row.student, row.lesson, f"{row.score:g}", f"{row.max_score:g}",
                             row.status, row.reason])


def format_table(rows: list[Row]) -> str:
    header = ("student", "lesson", "score", "max", "status", "reason")
    lines = [(r.student, r.lesson, f"{r.score:g}", f"{r.max_score:g}", r.status,
              r.reason[:80] + ("…" if len(r.reason) > 80 else "")) for r in rows]
    widths = [max(len(str(x)) for x in column) for column in zip(header, *lines)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*header), fmt.format(*("-" * w for w in widths)),
                      *(fmt.format(*line) for line in lines)])
