"""Learner-facing checks: ``from course_utils import checks; checks.check_pick_device(f)``.

One module per exercise, in one package per lesson (``lesson00/pick_device.py``), each
registering a check named ``check_<exercise>``; importing this package imports them all.
A check prints one line saying what it tested, or raises :class:`CheckFailure` whose
message names the cause and the fix. In IPython the failure is shown as that message
alone, without the checker's traceback; nbgrader's Validate lists it as it is (wrapped there to
fit its lines, which ``nbgrader validate`` cuts at 87 characters). docs/authoring.md says how
to write one.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
import sys
import textwrap

from .framework import REGISTRY, Check, CheckFailure


def _import_every_exercise() -> None:
    for lesson in pkgutil.iter_modules(__path__, prefix=f"{__name__}."):
        if lesson.ispkg and lesson.name.rsplit(".", 1)[1].startswith("lesson"):
            package = importlib.import_module(lesson.name)
            for exercise in pkgutil.iter_modules(package.__path__, prefix=f"{lesson.name}."):
                importlib.import_module(exercise.name)


# nbgrader's Validator prints each line of a failing cell's output indented by 4 and cuts it
# at 87 characters (its `width`, 90, less "..."); its kernel runs with NBGRADER_VALIDATING set.
VALIDATE_LINE = 82


def failure_text(message: str, validating: bool) -> str:
    """What a failed check shows: its message, wrapped to Validate's lines when validating."""
    if validating:
        message = "\n".join(textwrap.fill(line, VALIDATE_LINE) if line else line
                            for line in message.splitlines())
    return f"\x1b[0;31m✘ Check failed\x1b[0m\n{message}"


def _show_failures_briefly() -> None:
    """In IPython, show a CheckFailure as its message, not as the checker's traceback."""
    ipython = sys.modules.get("IPython")  # never import IPython just to ask
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return

    def show(shell, etype, value, tb, tb_offset=None):
        validating = bool(os.environ.get("NBGRADER_VALIDATING"))
        shell._showtraceback(etype, value, [failure_text(str(value), validating)])

    shell.set_custom_exc((CheckFailure,), show)


_import_every_exercise()
# The exercises register themselves on import: their names are known only now.
__all__ = ["REGISTRY", "Check", "CheckFailure", *sorted(REGISTRY)]  # noqa: PLE0604
_show_failures_briefly()


def __getattr__(name: str) -> Check:
    try:
        return REGISTRY[name]
    except KeyError:
        raise AttributeError(f"course_utils.checks has no check named {name!r}; the checks are: "
                             f"{', '.join(sorted(REGISTRY))}.") from None
