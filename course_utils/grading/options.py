"""Options declared once, on the record that carries them (as :class:`records.Limits` does).

A field whose metadata is :func:`option`'s carries its command-line flag, its value's name in
``--help``, its help and how its text becomes the field's value; the ``course`` command
builds the option from it (:func:`add_options`) and the record's value from the parsed
arguments (:func:`chosen`). A new option of `course grade` is one such field of
:class:`request.GradeRequest`, and of `course export` one of :class:`export.ExportRequest`.
"""
from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Option:
    flag: str
    metavar: str
    help: str
    read: Callable[[str], Any] = str  # the option's text -> the field's value
    choices: tuple[str, ...] = ()


def option(**spec: Any) -> dict[str, Option]:
    """The metadata of a request record's field that has an option:
    ``field(default=..., metadata=option(flag=..., metavar=..., help=..., read=...))``."""
    return {"option": Option(**spec)}


def options_of(record: type) -> list[dataclasses.Field]:
    """The fields of ``record`` that have a command-line option, in order."""
    return [each for each in dataclasses.fields(record) if "option" in each.metadata]


def add_options(parser: argparse.ArgumentParser | Any, record: type) -> None:
    """One option per such field; left out, the field keeps the record's default."""
    for each in options_of(record):
        spec: Option = each.metadata["option"]
        parser.add_argument(spec.flag, dest=each.name, metavar=spec.metavar, help=spec.help,
                            choices=spec.choices or None, default=None)


def chosen(args: argparse.Namespace, record: type) -> dict[str, Any]:
    """The values given on the command line, read into the fields' types."""
    values = {}
    for each in options_of(record):
        text = getattr(args, each.name, None)
        if text is not None:
            values[each.name] = each.metadata["option"].read(text)
    return values
