"""A wrong answer per lesson for the autograde round trip (tests/test_grading.py).

Each lesson has a module here (``lesson03.py``) defining ``WRONG``: one answer cell replaced
by a typical mistake, and the hint the feedback must then show. The round trip grades the
solution (full marks), the blank release (0) and this wrong answer (partial, with the hint).
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass


@dataclass(frozen=True)
class WrongAnswer:
    lesson: str  # e.g. "03_timing"
    grade_id: str  # the answer cell to replace
    source: str  # its buggy replacement
    hint: str  # a substring the feedback must contain


def wrong_answers() -> dict[str, WrongAnswer]:
    """lesson -> its WrongAnswer, from every module of this package."""
    found = {}
    for module in pkgutil.iter_modules(__path__, prefix=f"{__name__}."):
        wrong = importlib.import_module(module.name).WRONG
        found[wrong.lesson] = wrong
    return found
