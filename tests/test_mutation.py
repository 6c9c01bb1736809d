"""The mutation analysis (tests/mutation/, docs/mutation.md): its data stay consistent, and a
fast sample of it is a ratchet on the checks.

The full run is `make mutation` (minutes); here two quick exercises are run through the same
command, and their figures must not fall below tests/mutation/baseline.json, no new variant may
survive unless tests/mutation/equivalents.json lists it, and no right alternative may lose
points.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import ROOT
from .mutation.analysis import alternatives, equivalents
from .mutation.exercises import exercise as exercise_named
from .mutation.exercises import exercises
from .mutation.graded import InProcess, Sample, compare
from .mutation.report import REPORT, load_baseline, markdown, regressions
from .mutation.run import first_sentence, mentions, settings
from .mutation.variants import OPERATORS, variants

SAMPLE = ["lesson01/train_and_log", "lesson06/amp_settings"]


@pytest.fixture(scope="module")
def every_variant():
    return {exercise.key: variants(exercise) for exercise in exercises()}


def test_every_exercise_has_generic_variants_and_five_right_alternatives(every_variant):
    for exercise in exercises():
        kinds = {variant.kind for variant in every_variant[exercise.key]}
        assert "generic" in kinds, exercise.key
        assert len(alternatives(exercise)) >= 5, f"{exercise.key}: fewer than 5 alternatives"


def test_variant_ids_are_unique_stable_and_name_their_operator(every_variant):
    names = {operator.name for operator in OPERATORS}
    assert len(names) == len(OPERATORS)
    for exercise in exercises()[:3]:
        assert [v.id for v in variants(exercise)] == [v.id for v in every_variant[exercise.key]]
    ids = [variant.id for found in every_variant.values() for variant in found]
    assert len(ids) == len(set(ids))
    assert all(variant.operator in names and variant.mistake for found in
               every_variant.values() for variant in found)
    assert not any("to" in variant.keywords for found in every_variant.values()
                   for variant in found), "a call's name too short to tell it (x.to) is a keyword"


def test_every_listed_equivalent_is_a_variant_with_a_reason(every_variant):
    ids = {variant.id for found in every_variant.values() for variant in found}
    for vid, reason in equivalents().items():
        assert vid in ids, f"equivalents.json lists {vid}, which is no longer a variant"
        assert len(reason) > 20, f"{vid}: say why it behaves as the model answer does"


def test_the_baseline_covers_every_exercise_but_the_slow_ones():
    recorded = load_baseline()["exercises"]
    for exercise in exercises():
        assert exercise.key in recorded or settings(exercise).slow, (
            f"{exercise.key} is not in tests/mutation/baseline.json: run make mutation")
    survivors = {vid for record in recorded.values() for vid in record["survivors"]}
    assert not survivors & set(equivalents()), "a listed equivalent is recorded as a survivor"


def test_the_report_is_written_from_the_baseline():
    assert REPORT.read_text() == markdown(load_baseline()), (
        "docs/mutation.md is stale: run `python -m tests.mutation --write` (make mutation)")


def test_a_message_names_a_construct_by_its_stem_and_short_words_whole():
    assert mentions("time_fn() never synchronises after fn()", "synchronize")
    assert mentions("called zero_grad() once", "zero_grad")
    assert mentions("the batch is on 'cpu'", "cpu")
    assert mentions("the length is 3", "len") and not mentions("a sullen answer", "len")
    assert mentions("✘ line c: wrong", "c") and not mentions("a cache", "c")
    assert first_sentence("✘ line a: It is False. Because x.\nHow to fix it: y") == \
        "✘ line a: It is False."


def test_the_sample_keeps_its_figures_and_its_right_alternatives(tmp_path):
    out = tmp_path / "records.json"
    done = subprocess.run([sys.executable, "-m", "tests.mutation", "--json", str(out),
                           *(f"--exercise={key}" for key in SAMPLE)], cwd=ROOT, text=True,
                          capture_output=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    baseline = load_baseline()
    worse = [line for record in json.loads(out.read_text())
             for line in regressions(record, baseline)]
    assert not worse, "\n".join(worse)


def test_the_ratchet_flags_a_lower_share_a_new_survivor_and_a_lost_alternative():
    baseline = load_baseline()
    record = json.loads(json.dumps(baseline["exercises"][SAMPLE[1]]))
    assert regressions(record, baseline) == []
    row = dict(record["rows"][0], verdict="survivor")
    record["rows"].append(row)
    record["survivors"].append(row["id"])
    record["learner"]["named_share"] -= 0.01
    record["alternatives_lost"].append({"alternative": "right_one", "message": "lost"})
    found = "\n".join(regressions(record, baseline))
    assert f"new survivor {row['id']}" in found
    assert "learner named_share fell" in found
    assert "right alternative right_one lost points" in found


def test_one_exercise_graded_through_course_grade_agrees_with_in_process(grading_sandbox):
    """`make test-mutation-grade`'s comparison on one fast exercise: a killed variant and a
    right alternative, graded in the sandbox (about 6 s; the make target grades 21)."""
    done = subprocess.run([sys.executable, "-m", "tests.mutation", "--through-grade", "2",
                           "--exercise", "lesson03/crossover"], cwd=ROOT, text=True,
                          capture_output=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 sample(s) of 1 exercise(s)" in done.stdout and "2 agree" in done.stdout


def test_the_graded_comparison_flags_other_verdicts_points_and_model_answers():
    found = exercise_named("lesson03/crossover")
    killed = Sample(found, "killed", "a variant", "", InProcess(True, False, 0.0, "visible: wrong"))
    right = Sample(found, "right", "an alternative", "", InProcess(True, True, 1.0, "passed"))

    def row(crossover, time_fn=3.0):
        return {"exercises": {"test_time_fn": time_fn, "test_crossover": crossover},
                "status": "graded", "reason": ""}

    agreeing = {("killed", found.lesson): row(0.0), ("right", found.lesson): row(3.0)}
    assert compare([killed, right], agreeing) == []
    other = {("killed", found.lesson): row(3.0), ("right", found.lesson): row(1.5, 0.0)}
    found_lines = "\n".join(line for _, line in compare([killed, right], other))
    assert "a variant: in-process fails (visible: wrong; hidden run 0.0/3), graded 3.0/3" \
        in found_lines
    assert "an alternative: in-process full marks" in found_lines
    assert "lost points elsewhere: {'test_time_fn': 0.0}" in found_lines
