"""nbgrader configuration: solutions/ is the source, notebooks/ the learner release.

`course release` and `course grade` pass the same settings explicitly, so plain
`nbgrader ...` commands run from this folder behave the same way, and formgrader
(`make instructor`) reads the gradebook and folders `course grade` writes.
"""
import os

c = get_config()  # noqa: F821  (provided by nbgrader)

c.CourseDirectory.root = "."
c.CourseDirectory.course_id = "gpu-course"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
# `course grade` writes these (its default --out is grading-output), and `nbgrader collect`
# gathers submissions from the exchange into submitted/: `course grade grading-output/submitted`.
c.CourseDirectory.submitted_directory = "grading-output/submitted"
c.CourseDirectory.autograded_directory = "grading-output/autograded"
c.CourseDirectory.feedback_directory = "grading-output/feedback"
# COURSE_GRADEBOOK_URL names another gradebook — the PostgreSQL one a sharded class was graded
# into (docs/cluster.md) — for formgrader as for `course grade`, `course gradebook` and
# `course collect`. A plain postgresql:// URL means psycopg 3 (the course's postgres extra), as
# it does for `course grade`, whatever SQLAlchemy's default PostgreSQL driver is.
GRADEBOOK_URL = os.environ.get("COURSE_GRADEBOOK_URL") or "sqlite:///grading-output/gradebook.db"
for plain in ("postgresql://", "postgres://"):
    if GRADEBOOK_URL.startswith(plain):
        GRADEBOOK_URL = "postgresql+psycopg://" + GRADEBOOK_URL[len(plain):]
c.CourseDirectory.db_url = GRADEBOOK_URL
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "lesson08_trace.json"]
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# The exchange (release -> fetch -> submit -> collect): a folder in the course by default,
# created writable for everyone by `course gradebook` (`make instructor`). On a shared
# JupyterHub, point COURSE_EXCHANGE at a folder every user reaches, and give the students the
# same two settings (docs/instructor.md, "The exchange").
c.Exchange.root = os.environ.get("COURSE_EXCHANGE") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "exchange")

# Validate (the learner lab's toolbar button, and `nbgrader validate` run in this folder; both
# read this file, `course lab` starting the lab here) reruns the whole notebook in a new kernel,
# then lists each check that fails with its message. nbgrader's own limits do not fit the
# course: 30 s a cell, and 4 s for a cell's last output to arrive after it finished, past which
# the whole run ends in a 40-line CellTimeoutError traceback (seen at load average 15 in lesson
# 08's compile cell, walkthrough r4 M1). These fit the slowest cell of every lesson (Inductor's
# first compile in lesson 08, torchrun's two ranks in lesson 07) on a busy 2-core laptop, with
# room to spare; a cell that still runs past its limit is stopped and shown as failing, in the
# line below, while the rest of the notebook is still validated. They also hold for
# `nbgrader autograde`; `course grade` has limits of its own (README: Limits).
VALIDATE_CELL_SECONDS = 300
c.Execute.timeout = VALIDATE_CELL_SECONDS
c.Execute.iopub_timeout = 120
c.Execute.raise_on_iopub_timeout = False
c.Execute.startup_timeout = 120
# An error is reported as its one line ("NameError: name 'predict' is not defined"), a failed
# check as its message (course_utils/checks), and a cell stopped at its limit as the line below,
# never as a traceback through the course's or nbclient's code.
c.Execute.extra_arguments = ["--InteractiveShell.xmode=Minimal"]
STOPPED = (f"Validate stopped this cell after {VALIDATE_CELL_SECONDS} s (a cell's limit in "
           "nbgrader_config.py). Run the cell in the notebook to see what it waits for, then "
           "validate again.")
c.Execute.error_on_timeout = {"ename": "CellTimeoutError", "evalue": "", "traceback": [STOPPED]}
