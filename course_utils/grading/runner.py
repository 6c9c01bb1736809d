"""``course grade``: grade a folder of submissions, in parallel, crash-safely."""
from __future__ import annotations

import csv
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from ..paths import check_lessons, lesson_notebooks
from . import feedback, gradebook
from .session import Limits, unshare_prefix

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
    missing = [nb["name"] + ".ipynb" for nb in job["notebooks"] if not Path(nb["submitted"]).exists()]
    if not missing:
        return None
    from .structure import grade_items

    notebooks = []
    for nb in job["notebooks"]:
        items = grade_items(Path(nb["source"]), Path(nb["release"]))
        notebooks.append({"name": nb["name"], "status": "missing",
                          "reason": f"no file named {', '.join(missing)} was submitted",
                          "outputs": {},
                          "items": [{"grade_id": i.grade_id, "auto": i.auto, "points": i.points,
                                     "score": 0.0, "message": "not submitted",
                                     "docstring": i.docstring} for i in items]})
    return {"student": job["student"], "lesson": job["lesson"], "notebooks": notebooks}


def run_worker(job: dict) -> dict:
    """Grade one submission in a separate process, with a hard backstop on its wall time."""
    missing = _missing_notebooks(job)
    if missing:
        return missing
    limits = job["limits"]
    backstop = limits["submission_timeout"] + limits["startup_timeout"] + 30
    with tempfile.TemporaryDirectory(prefix="course-job-") as folder:
        job_path, result_path = Path(folder, "job.json"), Path(folder, "result.json")
        job_path.write_text(json.dumps(job))
        process = subprocess.Popen(
            [sys.executable, "-m", "course_utils.grading.worker", str(job_path), str(result_path)],
            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _, stderr = process.communicate(timeout=backstop)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return _failed(job, "timeout", f"grading took longer than {backstop:.0f} s and was "
                                           "stopped")
        if process.returncode != 0 or not result_path.exists():
            last = (stderr or b"").decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            return _failed(job, "error", f"the grader failed on this submission: {last[0]}")
        return json.loads(result_path.read_text())


def _failed(job: dict, status: str, reason: str) -> dict:
    from .structure import grade_items

    notebooks = []
    for nb in job["notebooks"]:
        items = grade_items(Path(nb["source"]), Path(nb["release"]))
        notebooks.append({"name": nb["name"], "status": status, "reason": reason, "outputs": {},
                          "items": [{"grade_id": i.grade_id, "auto": i.auto, "points": i.points,
                                     "score": 0.0, "message": reason, "docstring": i.docstring}
                                    for i in items]})
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
    """Grade every submission; write the gradebook, grades.csv and feedback; return the rows."""
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
    import torch  # noqa: PLC0415 - only to know whether a memory cap can be applied

    if torch.cuda.is_available():
        limits.memory_mb = 0  # CUDA reserves more address space than any sensible cap
    for lesson in chosen:
        gradebook.register_lesson(db_url, lesson, lesson_notebooks(root, lesson))
    run_seed = secrets.randbelow(2**31) if seed is None else seed
    threads = max(1, (os.cpu_count() or 1) // jobs)
    work = [_job(root, student, lesson, folder, limits, run_seed, threads)
            for student, lesson, folder in discover(submissions, chosen)]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(run_worker, work))
    # Every kernel is dead by now: nothing a student ran can touch what is written next.
    for result in results:
        gradebook.record(db_url, result)
    rows = [to_row(result) for result in results]
    write_csv(out / "grades.csv", rows)
    feedback.write_all(out / "feedback", results)
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
