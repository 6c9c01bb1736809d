"""`course grade` end to end: round trips per lesson and the hostile corpus, in one run."""
from __future__ import annotations

import copy
import csv
import sqlite3
import time

import nbformat
import pytest

from course_utils.grading.runner import grade
from course_utils.grading.session import Limits, unshare_prefix

from . import grading_corpus as corpus
from .conftest import ROOT
from .round_trips import wrong_answers

pytestmark = pytest.mark.slow

LIMITS = dict(cell_timeout=20.0, submission_timeout=90.0, memory_mb=4096, output_bytes=1_000_000)
SEED = 1234

WRONG_ANSWERS = wrong_answers()


def lesson_notebooks():
    """(lesson, source, release) of every released lesson (test_hygiene requires them all)."""
    for source in sorted(ROOT.glob("solutions/*/*.ipynb")):
        release = ROOT / "notebooks" / source.parent.name / source.name
        if release.exists():
            yield source.parent.name, source, release


def write(nb, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def build_round_trips(folder):
    """solution-<lesson>, blank-<lesson> and wrong-<lesson> submissions for every lesson."""
    for lesson, source, release in lesson_notebooks():
        solution = nbformat.read(source, as_version=4)
        write(solution, folder / f"solution-{lesson}" / lesson / source.name)
        write(nbformat.read(release, as_version=4), folder / f"blank-{lesson}" / lesson / source.name)
        answer = WRONG_ANSWERS[lesson]
        wrong = copy.deepcopy(solution)
        cell = next(c for c in wrong.cells
                    if c.metadata.get("nbgrader", {}).get("grade_id") == answer.grade_id)
        cell.source = answer.source
        write(wrong, folder / f"wrong-{lesson}" / lesson / source.name)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    submissions = tmp_path_factory.mktemp("submissions")
    out = tmp_path_factory.mktemp("grading-output")
    build_round_trips(submissions)
    solution = nbformat.read(ROOT / "solutions" / corpus.LESSON / corpus.NOTEBOOK, as_version=4)
    for case in corpus.CASES:
        corpus.write_case(case, solution, submissions)
    started = time.monotonic()
    rows = grade(ROOT, submissions, out, jobs=2, limits=Limits(**LIMITS), seed=SEED)
    seconds = time.monotonic() - started
    return {"rows": {(r.student, r.lesson): r for r in rows}, "out": out,
            "submissions": submissions, "seconds": seconds}


def autograded_max(source):
    nb = nbformat.read(source, as_version=4)
    return sum(c.metadata.nbgrader.get("points", 0) for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code")


@pytest.mark.parametrize("lesson", [lesson for lesson, _, _ in lesson_notebooks()])
def test_round_trip_scores(graded, lesson):
    """Checks the solution gets full marks, the blank release 0, a wrong answer partial marks."""
    source = next(s for name, s, _ in lesson_notebooks() if name == lesson)
    full = autograded_max(source)
    rows = graded["rows"]
    assert rows[(f"solution-{lesson}", lesson)].score == full
    assert rows[(f"solution-{lesson}", lesson)].status == "graded"
    assert rows[(f"blank-{lesson}", lesson)].score == 0
    wrong = rows[(f"wrong-{lesson}", lesson)]
    assert 0 < wrong.score < full
    feedback = (graded["out"] / "feedback" / f"wrong-{lesson}" / f"{lesson}.html").read_text()
    assert WRONG_ANSWERS[lesson].hint in feedback.replace("&#x27;", "'").replace("&quot;", '"')
    blank = (graded["out"] / "feedback" / f"blank-{lesson}" / f"{lesson}.html").read_text()
    assert "not implemented yet" in blank


@pytest.mark.parametrize("case", corpus.CASES, ids=lambda c: c.student)
def test_corpus_case_gets_the_grade_it_deserves(graded, case):
    """Checks each hostile or broken submission's exact score, status and reason."""
    if case.student == "read-solutions" and not unshare_prefix():
        pytest.skip("no private mount namespace here: solutions/ cannot be hidden from kernels")
    row = graded["rows"][(case.student, corpus.LESSON)]
    assert (row.score, row.status) == (case.score, case.status), row
    if case.reason:
        page = (graded["out"] / "feedback" / case.student / f"{corpus.LESSON}.html").read_text()
        assert case.reason in row.reason or case.reason in page.replace("&#x27;", "'"), row


def test_feedback_never_shows_hidden_tests(graded):
    """Checks no feedback page or autograded notebook contains hidden test source."""
    pages = list((graded["out"] / "feedback").rglob("*.html"))
    notebooks = list((graded["out"] / "autograded").rglob("*.ipynb"))
    assert pages and notebooks
    for page in pages + notebooks:
        text = page.read_text()
        assert "BEGIN HIDDEN TESTS" not in text
        assert "hidden=True" not in text


def test_autograded_notebooks_show_verdicts_for_the_formgrader(graded):
    """Checks the executed copy of a submission has its outputs and each test cell's verdict."""
    path = graded["out"] / "autograded" / "honest" / corpus.LESSON / corpus.NOTEBOOK
    nb = nbformat.read(path, as_version=4)
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id", "").startswith("test_")]
    assert [c.outputs[0].text for c in tests] == ["2 / 2: passed\n", "2 / 2: passed\n"]
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert any("computes on" in o.get("text", "") for o in first.outputs)


def test_grades_csv_and_gradebook_agree_with_the_table(graded):
    """Checks grades.csv rows and the nbgrader gradebook hold the same scores."""
    with (graded["out"] / "grades.csv").open() as handle:
        csv_rows = {(r["student"], r["lesson"]): r for r in csv.DictReader(handle)}
    assert csv_rows.keys() == graded["rows"].keys()
    for key, row in graded["rows"].items():
        assert float(csv_rows[key]["score"]) == row.score
        assert csv_rows[key]["status"] == row.status
    with sqlite3.connect(graded["out"] / "gradebook.db") as db:
        scores = dict(db.execute(
            "select student.id, sum(coalesce(grade.auto_score, 0)) from grade "
            "join submitted_notebook on grade.notebook_id = submitted_notebook.id "
            "join submitted_assignment on submitted_notebook.assignment_id = submitted_assignment.id "
            "join student on submitted_assignment.student_id = student.id "
            "join assignment on submitted_assignment.assignment_id = assignment.id "
            "where assignment.name = ? group by student.id", (corpus.LESSON,)))
    assert scores["honest"] == 4
    assert scores["write-gradebook"] == 0  # its attempt to write 100s changed nothing


def test_time_is_bounded(graded):
    """Checks the whole run, SIGINT-proof loop included, stayed within the configured bounds."""
    submissions = len(graded["rows"])
    assert graded["seconds"] < submissions * LIMITS["submission_timeout"] / 2


def test_jobs_1_gives_the_same_grades_as_jobs_2(graded, tmp_path):
    """Checks sequential grading reproduces the parallel run's rows exactly."""
    subset = ["honest", "os-exit-later", "corrupt-json", "edited-test"]
    submissions = tmp_path / "subset"
    for student in subset:
        (submissions / student).mkdir(parents=True)
        source = graded["submissions"] / student / corpus.LESSON
        target = submissions / student / corpus.LESSON
        target.mkdir()
        (target / corpus.NOTEBOOK).write_bytes((source / corpus.NOTEBOOK).read_bytes())
    rows = grade(ROOT, submissions, tmp_path / "out", jobs=1, limits=Limits(**LIMITS), seed=SEED)
    for row in rows:
        assert row == graded["rows"][(row.student, row.lesson)]
