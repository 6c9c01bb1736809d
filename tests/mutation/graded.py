"""A sample of variants graded through `course grade` (sandboxed), compared with in-process.

The mutation analysis runs each check in-process (:mod:`.run`); learners are graded by
`course grade`, which runs their cells in a sandboxed kernel, probes the answer there and
verifies in the grading worker. This module grades a deterministic sample through the real
command and checks that both give the same verdict: for each exercise of :data:`SAMPLE`,
some variants the check kills and one right answer (an equivalent variant, else a right
alternative), each written in place of the exercise's solution cell of a copy of the
lesson's solution notebook (one submission per sample), all graded in ONE
``course grade --jobs 2 --seed RUN_SEED`` run. In-process, the same cell text runs with the
hidden seed the grader derives for that student (``worker.case_seed``); the verdict is "full
marks" when every run (visible and hidden) passes, and the graded one when the test cell's
points are all awarded. The points must agree too: the grader awards the hidden run's share
(a failing visible run alone costs nothing there, so a visible failure the hidden draw does
not repeat shows up as a disagreement). Any difference is printed and the command exits 1.

``python -m tests.mutation --through-grade 3`` (``make test-mutation-grade``) runs it.
"""
from __future__ import annotations

import ast
import hashlib
import inspect
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from .analysis import alternative_name, alternatives, equivalents, warm_up
from .exercises import ROOT, Exercise, exercise
from .run import run_one, settings
from .variants import variants

# Fast exercises from different lessons (about a second per check; lesson07's DDP script,
# which launches torchrun per run, and the lessons that train models per case are left out).
SAMPLE = ("lesson00/pick_device", "lesson01/to_device", "lesson02/train_one_epoch",
          "lesson03/crossover", "lesson04/device_batches", "lesson06/amp_settings",
          "lesson08/train_without_syncs")
RUN_SEED = 2027  # the grading run's --seed: the grader and this module draw the same inputs
HIDDEN_CALL = 1  # a test cell's calls: the visible one (0), then the hidden one
TRIES_PER_KILL = 6  # variants tried (in the sample's order) for each killed one wanted


@dataclass(frozen=True)
class InProcess:
    """The check's verdict on a solution cell, run here as the mutation analysis runs it."""

    checked: bool  # the cell ran and the check gave verdicts (not a cell that raises)
    full: bool  # every run (visible, hidden) kept full marks
    hidden_share: float  # the hidden run's share of the points: what the grader awards
    detail: str  # the first failed run's message (its first line), or "passed"


@dataclass(frozen=True)
class Sample:
    """One submission: a version of an exercise's solution cell, and the in-process verdict."""

    exercise: Exercise
    student: str  # the submission's folder, unique per sample; it fixes the hidden seed
    what: str  # "generic variant <id>", "equivalent <id>", "right alternative <name>"
    source: str  # the solution cell's text, the same in-process and in the notebook
    verdict: InProcess


def hidden_seed(run_seed: int, student: str, exercise: Exercise) -> int:
    """The seed the grader draws this student's hidden inputs of the exercise from."""
    from course_utils.grading.worker import case_seed

    return case_seed(run_seed, student, exercise.lesson, f"test_{exercise.grade_id}",
                     HIDDEN_CALL)


def _order(key: str) -> str:
    """A fixed shuffle: the sample is spread over operators, not the first ids in order."""
    return hashlib.sha1(f"{RUN_SEED}/{key}".encode()).hexdigest()


def in_process(found: Exercise, student: str, source: str) -> InProcess:
    """The verdict on a solution cell with the grader's hidden seed for ``student``."""
    result = run_one(found, source, (hidden_seed(RUN_SEED, student, found),),
                     settings(found).timeout_s)
    if "runs" not in result:  # the cell raised, or the check ran out of time
        return InProcess(False, False, 0.0, json.dumps(result))
    failing = [run for run in result["runs"] if run["fraction"] < 1]
    share = next(run["fraction"] for run in result["runs"] if run["hidden"])
    if not failing:
        return InProcess(True, True, share, "passed")
    first = failing[0]
    where = f"hidden (seed {first['seed']})" if first["hidden"] else "visible"
    lines = first["message"].splitlines() or [""]
    return InProcess(True, False, share, f"{where}: {lines[0]}")


def alternative_source(found: Exercise, answer) -> str | None:
    """A right alternative as a solution cell: its module's imports, its function, and the
    exercise's name bound to it, or the name bound to a literal (lesson01/on_gpu's answers
    are data); None where it is neither."""
    if len(found.names) != 1:
        return None
    if not inspect.isfunction(answer):
        try:
            return f"{found.names[0]} = {answer!r}\n" if ast.literal_eval(
                repr(answer)) == answer else None
        except (ValueError, SyntaxError):  # not a literal: an OrderedDict, an object
            return None
    body = textwrap.dedent(inspect.getsource(answer))
    used = {node.id for node in ast.walk(ast.parse(body)) if isinstance(node, ast.Name)}
    imports = []  # only what the function uses: a learner's cell imports no test tools
    for node in ast.parse(inspect.getsource(sys.modules[answer.__module__])).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not getattr(node, "level", 0):
            node.names = [alias for alias in node.names
                          if (alias.asname or alias.name).split(".")[0] in used]
            imports += [ast.unparse(node)] if node.names else []
    return "\n".join([*imports, "", body, f"{found.names[0]} = {answer.__name__}", ""])


def _student(found: Exercise, variant_id: str) -> str:
    return f"{found.grade_id}-{variant_id.rsplit(':', 1)[1]}"


def pick(found: Exercise, killed: int) -> list[Sample]:
    """``killed`` variants the check fails in-process (learner and generic in turn), and one
    right answer: the first equivalent variant, else the first right alternative that keeps
    full marks in-process, in the sample's order."""
    known, chosen = equivalents(), []
    everything = sorted((v for v in variants(found) if v.id not in known),
                        key=lambda v: _order(v.id))
    for turn in range(killed):
        kind = ("learner", "generic")[turn % 2]
        taken = {sample.student for sample in chosen}
        # this turn's kind first; the other's once it has none left (a sort keeps the order)
        candidates = sorted((v for v in everything if _student(found, v.id) not in taken),
                            key=lambda v: v.kind != kind)
        for variant in candidates[:TRIES_PER_KILL]:
            student = _student(found, variant.id)
            verdict = in_process(found, student, variant.source)
            if verdict.checked and not verdict.full:  # killed by the check, not the cell
                chosen.append(Sample(found, student, f"{variant.kind} variant {variant.id}",
                                     variant.source, verdict))
                break
    rights = [(f"equivalent {v.id}", v.source) for v in sorted(
        (v for v in variants(found) if v.id in known), key=lambda v: _order(v.id))]
    written = [(f"right alternative {alternative_name(answer)}", alternative_source(found, answer))
               for answer in alternatives(found)]
    rights += sorted(((what, text) for what, text in written if text is not None),
                     key=lambda pair: _order(pair[1]))
    for what, source in rights:
        student = f"{found.grade_id}-right-{hashlib.sha1(source.encode()).hexdigest()[:8]}"
        verdict = in_process(found, student, source)
        if verdict.full:
            chosen.append(Sample(found, student, what, source, verdict))
            break
    return chosen


def write_submission(sample: Sample, folder: Path) -> None:
    """The lesson's solution notebook with the sample in place of the exercise's cell."""
    path = next((ROOT / "solutions" / sample.exercise.lesson).glob("*.ipynb"))
    notebook = nbformat.read(path, as_version=4)
    cell = next(c for c in notebook.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == sample.exercise.grade_id)
    cell.source = sample.source
    target = folder / sample.student / sample.exercise.lesson / path.name
    target.parent.mkdir(parents=True)
    nbformat.write(notebook, target)


def grade(samples: list[Sample], folder: Path) -> dict[tuple[str, str], dict]:
    """Every sample graded in one `course grade --jobs 2` run: grades.json's rows by
    (student, lesson) (every student gets a row, `missing`, for the lessons of the others)."""
    submissions, out = folder / "submissions", folder / "out"
    for sample in samples:
        write_submission(sample, submissions)
    done = subprocess.run([sys.executable, "-m", "course_utils", "grade", str(submissions),
                           "--out", str(out), "--jobs", "2", "--seed", str(RUN_SEED)],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):  # 1: some row is not fully graded (a variant's error)
        raise RuntimeError(f"course grade failed ({done.returncode}):\n{done.stderr[-3000:]}")
    rows = json.loads((out / "grades.json").read_text())["rows"]
    return {(row["student"], row["lesson"]): row for row in rows}


def lesson_points(lesson: str) -> dict[str, float]:
    """Each autograded cell's points in the lesson's solution notebook, by grade_id."""
    path = next((ROOT / "solutions" / lesson).glob("*.ipynb"))
    return {c.metadata.nbgrader["grade_id"]: c.metadata.nbgrader["points"]
            for c in nbformat.read(path, as_version=4).cells
            if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"}


def compare(samples: list[Sample], rows: dict[tuple[str, str], dict]) -> list[tuple[str, str]]:
    """(student, line) per disagreement: a verdict, or a model answer elsewhere in the
    notebook that lost points (the grader's environment, not the sample, then decides)."""
    problems = []
    for sample in samples:
        found = sample.exercise
        row, test_id = rows[sample.student, found.lesson], f"test_{found.grade_id}"
        most = lesson_points(found.lesson)
        score = row["exercises"].get(test_id)
        graded_full, verdict = score is not None and score >= most[test_id], sample.verdict
        # the grader's own rounding (worker._check_item) of the hidden run's share
        expected = round(most[test_id] * verdict.hidden_share, 2)
        name = f"{found.key} {sample.what}"
        if graded_full != verdict.full or score != expected:
            here = "full marks" if verdict.full else "fails"
            line = (f"{name}: in-process {here} ({verdict.detail}; hidden run {expected}/"
                    f"{most[test_id]}), graded {score}/{most[test_id]} (status "
                    f"{row['status']}: {row['reason'] or 'none given'})")
            problems.append((sample.student, line))
        short = {grade_id: got for grade_id, got in row["exercises"].items()
                 if grade_id != test_id and got < most.get(grade_id, 0)}
        if short:
            line = f"{name}: the notebook's model answers lost points elsewhere: {short}"
            problems.append((sample.student, line))
    return problems


def main(per_exercise: int, keys: list[str] | None = None) -> int:
    """Pick, grade and compare; prints the figures and every disagreement; 0 when none."""
    if per_exercise < 2:
        raise SystemExit(f"--through-grade {per_exercise}: at least 2 (one right answer and "
                         "one killed variant per exercise)")
    started, samples, short = time.perf_counter(), [], []
    for key in keys or SAMPLE:
        found = exercise(key)
        if found.script or settings(found).slow:
            raise SystemExit(f"{key}: a script or slow exercise; the sample takes fast ones: "
                             f"{', '.join(SAMPLE)}")
        warm_up(found, (RUN_SEED,))
        answers = pick(found, per_exercise - 1)
        if len(answers) < per_exercise:
            short.append(f"{key}: {len(answers)} of {per_exercise} answers found (killed "
                         f"variants among the first {TRIES_PER_KILL} tried, a right answer)")
        samples += answers
    picking_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="mutation-graded-") as folder:
        rows = grade(samples, Path(folder))
    problems = compare(samples, rows)
    for sample in samples:
        print(f"  {sample.exercise.key:28} {'full' if sample.verdict.full else 'fail':4}  "
              f"{sample.what}")
    for _, line in problems:
        print(f"MISMATCH: {line}")
    for line in short:
        print(f"SHORT SAMPLE: {line}")
    agreeing = len(samples) - len({student for student, _ in problems})
    print(f"{len(samples)} sample(s) of {len({s.exercise.key for s in samples})} exercise(s) "
          f"graded through `course grade --jobs 2 --seed {RUN_SEED}`: {agreeing} agree with "
          f"in-process; {picking_s:.0f} s picking in-process, "
          f"{time.perf_counter() - started - picking_s:.0f} s grading")
    return 1 if problems or short else 0
