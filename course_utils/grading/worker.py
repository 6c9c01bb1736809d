"""Grade one submission in a worker process (see runner.py).

Runs in its own process. The student's code runs only in the kernel this process
starts; checks' verdicts are computed here from the plain JSON the probes return.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from ..checks import REGISTRY
from ..checks.framework import score_fraction
from .session import CellTimeout, KernelDied, KernelSession, Limits, OutputLimit, ProbeUnavailable
from .structure import GradeItem, InvalidSubmission, grade_items, read_submission, tampering

KEPT_ENV = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "COURSE_DEVICE", "TMPDIR",
            "VIRTUAL_ENV", "PYTHONPATH")


def case_seed(run_seed: int, student: str, lesson: str, grade_id: str, index: int) -> int:
    """Inputs depend on the run's seed and the case, never on the order of grading."""
    text = f"{run_seed}/{student}/{lesson}/{grade_id}/{index}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:4], "big")


def item_result(item: GradeItem, score: float, message: str) -> dict:
    return {"grade_id": item.grade_id, "auto": item.auto, "points": item.points,
            "score": score, "message": message, "docstring": item.docstring}


def _run_checks(session: KernelSession, item: GradeItem, job: dict) -> tuple[float, str]:
    """Probe in the kernel, verify here; the points are the share of the deciding cases passed."""
    verdicts, messages = [], []
    for index, call in enumerate(item.calls):
        check = REGISTRY.get(call.check_name)
        if check is None:
            return 0.0, f"internal: unknown check {call.check_name!r}"
        seed = case_seed(job["seed"], job["student"], job["lesson"], item.grade_id, index)
        inputs = check.make_inputs(seed, call.hidden)
        try:
            text = session.evaluate(check.probe_expression(call.answer_names, inputs))
            observations = json.loads(_literal(text))
        except ProbeUnavailable as error:
            names = ", ".join(call.answer_names)
            return 0.0, (f"could not check {names}: {error}. Define it in its answer cell and "
                         "make sure the notebook runs top to bottom.")
        except (ValueError, TypeError):
            return 0.0, "the probe's answer was not valid data (was the kernel tampered with?)"
        verdict = check.evaluate(inputs, observations, call.hidden)
        verdicts.append((call.hidden, verdict))
        if not verdict.passed:
            repeated = verdict.message in (message for _, message in messages)
            messages.append((call.hidden, "the same problem as above." if repeated
                             else verdict.message))
    feedback = "\n".join(("Hidden test failed: " if hidden else "") + message
                         for hidden, message in messages)
    return item.points * score_fraction(verdicts), feedback or "passed"


def _literal(text: str) -> str:
    """The string whose repr the kernel sent back (never evaluated as code)."""
    value = ast.literal_eval(text)
    if not isinstance(value, str):
        raise ValueError("not a string")
    return value


def grade_notebook(job: dict, notebook: dict) -> dict:
    """Grade one notebook file of a submission; never raises for the student's faults."""
    items = grade_items(Path(notebook["source"]), Path(notebook["release"]))
    result = {"name": notebook["name"], "status": "graded", "reason": "", "items": [],
              "outputs": {}}
    try:
        nb = read_submission(Path(notebook["submitted"]))
    except (InvalidSubmission, OSError) as error:
        result.update(status="invalid", reason=str(error))
        result["items"] = [item_result(i, 0.0, f"not graded: {error}") for i in items]
        return result

    problems = tampering(nb, items)
    by_id = {item.grade_id: item for item in items}
    done: dict[str, dict] = {}
    workdir = Path(tempfile.mkdtemp(prefix="course-grade-"))
    env = {key: os.environ[key] for key in KEPT_ENV if key in os.environ}
    env.update(HOME=str(workdir), MPLBACKEND="Agg", PYTHONHASHSEED="0",
               OMP_NUM_THREADS=str(job.get("threads", 1)), PYDEVD_DISABLE_FILE_VALIDATION="1")
    limits = Limits(**job["limits"])
    session = KernelSession(workdir, limits, deadline=job["deadline"])
    stopped = ""
    try:
        session.start(env)
        for index, cell in enumerate(nb.cells):
            meta = cell.metadata.get("nbgrader", {})
            item = by_id.get(meta.get("grade_id"))
            if item is not None and item.grade_id in problems:
                continue  # a changed graded cell is neither run nor credited
            if item is not None and item.auto:
                if item.grade_id not in done:
                    done[item.grade_id] = item_result(item, *_run_checks(session, item, job))
                continue
            if cell.cell_type != "code" or not cell.source.strip():
                continue
            run = session.run_cell(cell.source)
            result["outputs"][str(index)] = run.outputs
    except CellTimeout as error:
        stopped, status = f"{error} (in cell {index})", "timeout"
    except OutputLimit as error:
        stopped, status = f"{error} (in cell {index})", "output-limit"
    except KernelDied as error:
        stopped, status = f"{error} (in cell {index})", "kernel-died"
    finally:
        session.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    if stopped:
        result.update(status=status, reason=stopped)

    for item in items:
        if item.grade_id in done:
            result["items"].append(done[item.grade_id])
        elif item.grade_id in problems:
            result["items"].append(item_result(item, 0.0, problems[item.grade_id] + "; it scores 0"))
        elif not item.auto:
            result["items"].append(item_result(item, None, "needs manual grading"))
        else:
            reason = f"not checked: {stopped}" if stopped else "not checked"
            result["items"].append(item_result(item, 0.0, reason))
    if problems and result["status"] == "graded":
        result.update(status="tampered", reason="; ".join(problems.values()))
    return result


def grade_submission(job: dict) -> dict:
    """Grade every notebook of one (student, lesson) submission."""
    notebooks = [grade_notebook(job, notebook) for notebook in job["notebooks"]]
    return {"student": job["student"], "lesson": job["lesson"], "notebooks": notebooks}


def run_job(job: dict) -> dict:
    """Entry point in a grading worker process: start the submission's clock, then grade."""
    job = dict(job, deadline=time.monotonic() + job["limits"]["submission_timeout"])
    return grade_submission(job)
