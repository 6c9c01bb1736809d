"""Mutation analysis of the course's checks (docs/mutation.md).

Each exercise's model answer (its solution cell in solutions/) is changed one construct at a
time by the operators of :mod:`.operators`: *generic* ones (delete a statement, swap an
operator, shift a constant or a bound, drop a call) and *learner* ones, each modelling a
mistake people make in device code. Every variant, and every right alternative of
``alternatives/lessonNN_<exercise>.py``, is checked in-process with several seeds
(:mod:`.run`); :mod:`.report` writes docs/mutation.md and compares with ``baseline.json``.

``python -m tests.mutation`` (``make mutation``) runs it; ``tests/test_mutation.py`` runs a
fast part of it as a ratchet.
"""
