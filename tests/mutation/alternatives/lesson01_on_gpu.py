"""Right alternatives: the same predictions written in other ways."""
from __future__ import annotations

import collections

ANSWERS = (False, True, False, True, True, True, False, True)

ALTERNATIVES = [
    dict(zip("abcdefgh", ANSWERS, strict=True)),  # zip over the labels
    {"h": True, "g": False, "f": True, "e": True, "d": True, "c": False, "b": True,
     "a": False},  # another order
    {line: line in "bdefh" for line in "abcdefgh"},  # a comprehension
    dict(a=False, b=True, c=False, d=True, e=True, f=True, g=False, h=True),  # noqa: C408
    collections.OrderedDict((line, bool(value)) for line, value in zip(
        "abcdefgh", (0, 1, 0, 1, 1, 1, 0, 1), strict=True)),  # a dict subclass, from 0/1
]
