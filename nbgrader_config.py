"""nbgrader configuration: solutions/ is the source, notebooks/ the learner release.

`course release` and `course grade` pass the same settings explicitly, so plain
`nbgrader ...` commands run from this folder behave the same way.
"""
c = get_config()  # noqa: F821  (provided by nbgrader)

c.CourseDirectory.root = "."
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.submitted_directory = "grading-output/submitted"
c.CourseDirectory.autograded_directory = "grading-output/autograded"
c.CourseDirectory.feedback_directory = "grading-output/feedback"
c.CourseDirectory.db_url = "sqlite:///grading-output/gradebook.db"
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__"]
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
