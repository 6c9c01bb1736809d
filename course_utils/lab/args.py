"""Checks of the numbers a learner passes to the lab helpers, with one wording for each error.

Each check returns the value (as ``float`` for numbers) or raises ``ValueError`` naming the
function, the argument, the value given and what is allowed:
``time_epochs: epochs must be a positive whole number, got 0.`` ``True`` is refused wherever a
number is asked for: it is an ``int`` to Python, but never what a learner meant.
Devices are read by :func:`course_utils.lab.devices.resolve`.
"""
from __future__ import annotations

__all__ = [
    "is_real",
    "is_whole",
    "positive_int",
    "positive_number",
    "seconds",
    "whole_number",
]


def is_whole(value) -> bool:
    """An ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_real(value) -> bool:
    """An ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _refuse(function: str, name: str, allowed: str, value) -> ValueError:
    return ValueError(f"{function}: {name} must be {allowed}, got {value!r}.")


def positive_int(value, name: str, function: str, *, none_means: str | None = None):
    """``value`` if it is a whole number >= 1; with ``none_means``, None is allowed too."""
    if value is None and none_means is not None:
        return None
    if not is_whole(value) or value < 1:
        allowed = "a positive whole number"
        if none_means is not None:
            allowed += f" or None ({none_means})"
        raise _refuse(function, name, allowed, value)
    return value


def whole_number(value, name: str, function: str, *, minimum: int = 0) -> int:
    """``value`` if it is a whole number >= ``minimum``."""
    if not is_whole(value) or value < minimum:
        raise _refuse(function, name, f"a whole number of at least {minimum}", value)
    return value


def positive_number(value, name: str, function: str) -> float:
    """``value`` as a float if it is a number > 0."""
    if not is_real(value) or not value > 0:
        raise _refuse(function, name, "a positive number", value)
    return float(value)


def seconds(value, name: str, function: str) -> float:
    """``value`` as a float if it is a positive number of seconds."""
    if not is_real(value) or not value > 0:
        raise _refuse(function, name, "a positive number of seconds", value)
    return float(value)
