"""Autograding that student code cannot reach (see docs/grading.md).

Student notebooks run in resource-limited kernels, each in its own bubblewrap sandbox; the
grader sends each check's probe to that kernel, receives plain JSON back, and decides the
score here, in a process the student's code never runs in. nbgrader stays the gradebook.
"""
