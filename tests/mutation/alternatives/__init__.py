"""Right alternatives per exercise (lessonNN_<exercise>.py, ALTERNATIVES: at least five).

Each is right in another style or API than the model answer; the mutation analysis requires
every one to keep full marks. An entry is the answer (a function, a class, a value), a tuple
of answers for a check taking several, or, for a script exercise, the script's text. Many
are the right answers of the checks' own tests, imported from
tests/checks/lessonNN/test_<exercise>.py, where they are defined once: a change there is a
change here, and `python -m tests.mutation --check` says if one of them then loses points.
"""
