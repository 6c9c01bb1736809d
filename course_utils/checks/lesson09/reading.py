"""Numbers out of describe() facts, shared by lesson 09's checks (all of them take numbers)."""
from __future__ import annotations

import math


def number_in(facts: dict) -> float | None:
    """The real number described (a Python or NumPy number, or a one-element tensor); None
    for anything else, NaN and infinities included."""
    value = facts.get("value")
    if facts.get("type") == "Tensor" and len(facts.get("values") or []) == 1:
        value = facts["values"][0]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def shown(value: float | None) -> str:
    return "not a finite number" if value is None else f"{value:.6g}"
