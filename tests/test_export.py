"""`course export`: Canvas's gradebook import CSV (from a template Canvas exported, or
without one) and a plain CSV keyed by the roster's ids, per lesson or per exercise."""
from __future__ import annotations

import csv

import pytest

from course_utils.grading.records import Status
from course_utils.grading.report import Row, write_csv
from course_utils.tools.cli import main

# A gradebook as Canvas exports it (Grades > Export > Export Entire Gradebook): the identity
# columns, the course's assignments as "Name (assignment id)", read-only totals, a "Points
# Possible" row, a student matched by SIS Login ID only (an email), one never graded here.
CANVAS_EXPORT = """\
Student,ID,SIS User ID,SIS Login ID,Section,00_setup (1234),Quiz 1 (99),Current Score
    Points Possible,,,,,6,10,(read only)
"Archer, Alice",501,alice,alice@example.org,GPU-1,,8,80
"Baker, Bob",502,S-0002,bob@example.org,GPU-1,,7,70
"Zane, Zoe",503,zoe,zoe@example.org,GPU-2,,9,90
"""
ROSTER = "id,first_name,last_name,email\nalice,Alice,Archer,\nbob,Bob,Baker,bob@example.org\n"


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    """A grades.csv as `course grade` writes it: alice late, bob's written answer pending,
    carol on no Canvas roster."""
    folder = tmp_path_factory.mktemp("grading-output")
    write_csv(folder / "grades.csv", [
        Row("alice", "00_setup", 4.5, 6, Status.GRADED, "submitted 1.20 days late: -1.5 points",
            7, (("test_pick_device", 2), ("test_gpu_inventory", 2), ("hardcoded_cuda", 2)),
            "Archer, Alice", 1.5),
        Row("bob", "00_setup", 2, 6, Status.GRADED, "1 written answer needs manual grading", 7,
            (("test_pick_device", 2), ("test_gpu_inventory", 0)), "Baker, Bob"),
        Row("carol", "00_setup", 0, 6, Status.MISSING, "nothing submitted", 7, (), ""),
    ])
    (folder / "canvas.csv").write_text(CANVAS_EXPORT)
    (folder / "students.csv").write_text(ROSTER)
    return folder


def read(path):
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def test_canvas_from_its_own_export_keeps_its_ids(out, capsys):
    """Checks the Canvas file keeps Canvas's students and assignment ids, matches alice by SIS
    User ID and bob by the SIS Login ID his roster email gives, leaves zoe blank, and names
    carol (no Canvas row) and bob's pending written answer."""
    assert main(["export", "--out", str(out), "--template", str(out / "canvas.csv"),
                 "--roster", str(out / "students.csv")]) == 0
    lines = read(out / "grades-canvas.csv")
    assert lines[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                        "00_setup (1234)"]
    assert lines[1] == ["    Points Possible", "", "", "", "", "6"]
    assert lines[2:] == [["Archer, Alice", "501", "alice", "alice@example.org", "GPU-1", "4.5"],
                         ["Baker, Bob", "502", "S-0002", "bob@example.org", "GPU-1", "2"],
                         ["Zane, Zoe", "503", "zoe", "zoe@example.org", "GPU-2", ""]]
    printed = capsys.readouterr()
    assert "3 student(s)" in printed.out
    assert "not exported: carol" in printed.err and "bob 00_setup" in printed.err


def test_canvas_without_a_template_per_exercise(out):
    """Checks the documented columns, a column per exercise named after its lesson, the
    penalty as a column of its own, and a written answer not graded yet left blank."""
    target = out / "by-exercise.csv"
    assert main(["export", "--out", str(out), "--by", "exercise", "--to", str(target)]) == 0
    header, points, alice, bob, carol = read(target)
    assert header == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                      "00_setup: test_pick_device", "00_setup: test_gpu_inventory",
                      "00_setup: hardcoded_cuda", "00_setup: late penalty"]
    assert points[0] == "    Points Possible" and points[5:] == ["2", "2", "2", "0"]
    assert alice == ["Archer, Alice", "", "alice", "alice", "", "2", "2", "2", "-1.5"]
    assert bob[5:] == ["2", "0", "", ""] and carol[:3] == ["carol", "", "carol"]


def test_plain_csv_keyed_by_the_roster(out):
    assert main(["export", "--out", str(out), "--format", "csv"]) == 0
    assert read(out / "grades-csv.csv") == [
        ["student", "name", "00_setup", "total", "total_possible"],
        ["alice", "Archer, Alice", "4.5", "4.5", "6"],
        ["bob", "Baker, Bob", "2", "2", "6"],
        ["carol", "", "0", "0", "6"]]


def test_a_file_that_is_not_a_canvas_export_is_named(out, capsys):
    (out / "other.csv").write_text("name,score\nalice,3\n")
    assert main(["export", "--out", str(out), "--template", str(out / "other.csv")]) == 2
    assert "is not a Canvas gradebook export: no column Student, SIS User ID" \
        in capsys.readouterr().err


def test_export_needs_grades(tmp_path, capsys):
    assert main(["export", "--out", str(tmp_path)]) == 2
    assert "run `course grade` first" in capsys.readouterr().err
