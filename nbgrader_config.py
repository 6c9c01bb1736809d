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
c.CourseDirectory.db_url = "sqlite:///grading-output/gradebook.db"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "lesson08_trace.json"]
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# The exchange (release -> fetch -> submit -> collect): a folder in the course by default,
# created writable for everyone by `course gradebook` (`make instructor`). On a shared
# JupyterHub, point COURSE_EXCHANGE at a folder every user reaches, and give the students the
# same two settings (docs/instructor.md, "The exchange").
c.Exchange.root = os.environ.get("COURSE_EXCHANGE") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "exchange")
