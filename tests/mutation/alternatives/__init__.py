"""Right alternatives per exercise (lessonNN_<exercise>.py, ALTERNATIVES: at least five).

Each is right in another style or API than the model answer; the mutation analysis requires
every one to keep full marks. An entry is the answer (a function, a class, a value), a tuple
of answers for a check taking several, or, for a script exercise, the script's text. Many
are copied from tests/test_checks_lessonNN.py (frozen copies: those tests change).
"""
