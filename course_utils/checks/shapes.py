"""The shape of a probe's observations, checked on the trusted side before verify() reads them.

A check declares what its probe reports as a type (``check(..., observes=Observations)``):
TypedDicts with a comment per field, lists, unions, None, plain JSON values. The observations
come from the learner's kernel, so they may be incomplete or forged: :func:`shape_problem`
says where they differ from the declared type (a missing or unknown key, a wrong kind of
value), and Check.evaluate then fails the answer as "incomplete or forged data". Once they
have the declared shape, an error inside verify() is the check's own bug (framework.GraderError).
"""
from __future__ import annotations

import types
import typing
from typing import Any, Union

_PLAIN = {str: (str,), bool: (bool,), int: (int,), float: (int, float), type(None): (type(None),)}


def shape_problem(value: Any, expected: Any, where: str = "observations") -> str | None:
    """Where ``value`` (decoded JSON) differs from the type ``expected``, or None."""
    if expected is Any:
        return None
    origin, args = typing.get_origin(expected), typing.get_args(expected)
    if origin in (Union, types.UnionType):
        problems = [shape_problem(value, option, where) for option in args]
        return None if None in problems else next(p for p in problems if p)
    if typing.is_typeddict(expected):
        return _typed_dict_problem(value, expected, where)
    if expected in _PLAIN:
        ok = isinstance(value, _PLAIN[expected]) and (expected is bool or not isinstance(
            value, bool) or expected is type(None))
        return None if ok else f"{where} is {type(value).__name__}, not {expected.__name__}"
    if expected is list or origin is list:
        if not isinstance(value, list):
            return f"{where} is {type(value).__name__}, not a list"
        item = args[0] if args else Any
        return next((p for i, v in enumerate(value)
                     if (p := shape_problem(v, item, f"{where}[{i}]"))), None)
    if expected is dict or origin is dict:
        if not isinstance(value, dict):
            return f"{where} is {type(value).__name__}, not a dict"
        item = args[1] if args else Any
        return next((p for k, v in value.items()
                     if (p := shape_problem(v, item, f"{where}[{k!r}]"))), None)
    raise TypeError(f"shape_problem: {expected!r} is not a type observations can have "
                    "(allowed: TypedDict, list[...], dict[str, ...], unions, str, int, float, "
                    "bool, None, Any).")


def _typed_dict_problem(value: Any, expected: Any, where: str) -> str | None:
    if not isinstance(value, dict):
        return f"{where} is {type(value).__name__}, not a record"
    fields = typing.get_type_hints(expected)
    missing = sorted(expected.__required_keys__ - value.keys())
    unknown = sorted(value.keys() - fields.keys())
    if missing or unknown:
        return f"{where} lacks {missing} or has unknown keys {unknown}"
    return next((p for key, item in value.items()
                 if (p := shape_problem(item, fields[key], f"{where}[{key!r}]"))), None)
