"""Show an error the way a lesson wants it: the one line that matters, not 100 frames.

    with show_error():
        x_gpu + x_cpu          # prints "RuntimeError: Expected all tensors to be on ..."

Lessons demonstrate errors on purpose (a device mismatch, an out-of-memory error). A full
traceback through PyTorch buries the message; :func:`show_error` prints the exception's
type and message and the line of the cell that raised it, and lets the notebook go on.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class ShownError:
    """What :func:`show_error` caught: ``None`` until the block raises."""

    error: BaseException | None = None

    @property
    def raised(self) -> bool:
        return self.error is not None


def short_error(error: BaseException) -> str:
    """'RuntimeError: message' plus, when known, the line of the learner's code that raised."""
    from ..probe import describe_error

    facts = describe_error(error)
    message = facts["message"].strip()
    text = f"{facts['type']}: {message}" if message else facts["type"]
    if facts["line"]:
        text += f"\n    raised by: {facts['line']['text']}"
    return text


@contextmanager
def show_error(*expected: type[BaseException]) -> Iterator[ShownError]:
    """Run a block that may raise; print its error briefly instead of a traceback.

    With exception classes given, only those are caught; anything else propagates. When the
    block raises nothing, say so (on some machines a demonstration has nothing to show).
    """
    shown = ShownError()
    caught = expected or (Exception,)
    try:
        yield shown
    except caught as error:
        shown.error = error
        print(short_error(error))
    else:
        print("(no error: this block ran without raising on this machine)")
