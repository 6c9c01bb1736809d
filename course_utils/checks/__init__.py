"""Learner-facing checks: ``from course_utils import checks; checks.check_pick_device(f)``.

One module per exercise, in one package per lesson (``lesson00/pick_device.py``), each
registering a check named ``check_<exercise>``; importing this package imports them all.
A check prints one line saying what it tested, or raises :class:`CheckFailure` whose
message names the cause and the fix. In IPython the failure is shown as that message
alone, without the checker's traceback. docs/authoring.md says how to write one.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys

from .framework import REGISTRY, Check, CheckFailure


def _import_every_exercise() -> None:
    for lesson in pkgutil.iter_modules(__path__, prefix=f"{__name__}."):
        if lesson.ispkg and lesson.name.rsplit(".", 1)[1].startswith("lesson"):
            package = importlib.import_module(lesson.name)
            for exercise in pkgutil.iter_modules(package.__path__, prefix=f"{lesson.name}."):
                importlib.import_module(exercise.name)


def _show_failures_briefly() -> None:
    """In IPython, show a CheckFailure as its message, not as the checker's traceback."""
    ipython = sys.modules.get("IPython")  # never import IPython just to ask
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return

    def show(shell, etype, value, tb, tb_offset=None):
        shell._showtraceback(etype, value, [f"\x1b[0;31m✘ Check failed\x1b[0m\n{value}"])

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
