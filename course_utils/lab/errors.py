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


MESSAGE_CHARS = 2000  # a pathological message (a huge tensor's repr) stays readable


def short_error(error: BaseException) -> str:
    """'RuntimeError: message' plus, when known, the line of the learner's code that raised."""
    from ..probe import describe_error

    facts = describe_error(error)
    # The whole message, not the probes' 400-character summary: PyTorch puts its advice at the
    # end (the out-of-memory error's PYTORCH_CUDA_ALLOC_CONF came after character 400).
    message = str(error).strip()
    if len(message) > MESSAGE_CHARS:
        message = message[:MESSAGE_CHARS] + " [...]"
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
        print(short_error(error))
        shown.error = _without_frames(error)
    else:
        print("(no error: this block ran without raising on this machine)")


def _without_frames(error: BaseException) -> BaseException:
    """``error`` and the errors it chains to, with their tracebacks dropped.

    A kept traceback keeps every frame it passed through alive, with their locals: a failed
    DataLoader iterator, the tensors of a step that ran out of memory. Worse, the error, its
    traceback and this generator's frame form a reference cycle that only the garbage collector
    frees, at a moment nobody chooses: inside a DataLoader worker forked later, a collected
    iterator prints "AssertionError: can only test a child process" (lesson 04).
    """
    seen: set[int] = set()
    link: BaseException | None = error
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        link.__traceback__ = None
        link = link.__cause__ or link.__context__
    return error

