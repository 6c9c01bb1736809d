"""Facts about values and errors, and calling the learner's code without crashing the probe.

* :func:`describe`, :func:`describe_error` -- plain, JSON-able facts about a value, an exception;
* :func:`run_learner` -- call the learner's code; its return value or its error, never a crash;
* :class:`StopProbe` -- ends the learner's code once the probe has seen enough;
* :class:`NotSimulated` -- a device query a simulated machine does not answer.

What a probe reports about an error has one shape, :class:`ErrorFacts`, built in one place,
:func:`error_facts`; verify() functions on the trusted side read it by these keys.
"""
from typing import NotRequired, TypedDict


class LineFacts(TypedDict):
    """The last line of the learner's own code in a traceback."""

    lineno: int
    text: str  # at most 200 characters
    function: str
    # the names of that function's own arguments (set for an error's line only): a NameError's
    # message can say which names the function had to work with
    arguments: NotRequired[list]


class ErrorFacts(TypedDict):
    """An exception, as plain facts (JSON-able)."""

    type: str  # the exception's class name, e.g. 'RuntimeError'
    kinds: list  # its classes, most specific first, without BaseException and object
    message: str  # at most 400 characters
    attribute: "str | None"  # the missing attribute of an AttributeError
    line: "LineFacts | None"  # None when the error arose outside the learner's code
    raised_in: "str | None"  # the library file that raised it, e.g. 'torch/cuda/__init__.py'


def error_facts(type, kinds, message, attribute=None, line=None, raised_in=None):
    """An :class:`ErrorFacts` record (the one place its keys are spelled)."""
    return ErrorFacts(type=type, kinds=list(kinds), message=message, attribute=attribute,
                      line=line, raised_in=raised_in)


class StopProbe(BaseException):
    """Raised by a probe's hooks to end the learner's code early.

    A BaseException, so that a learner's ``except Exception:`` does not swallow it.
    """


class NotSimulated(BaseException):
    """The learner called a device query that a :class:`SimulatedMachine` does not answer."""


def type_name(value):
    """The name of a value's type, e.g. 'Tensor', 'Linear', 'NoneType'."""
    return type(value).__name__


def _course_package_folder():
    """The installed course package's folder, located without importing it (the probe kit
    stands below every other part of the course), or None where it is not installed."""
    import importlib.util
    import os

    spec = importlib.util.find_spec("course_utils")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.abspath(next(iter(spec.submodule_search_locations)))


def _is_library_file(filename):
    """True for Python's, installed packages' and this course's own files and for the probe."""
    import os
    import sys

    if filename == "<string>" or filename.startswith("<frozen"):
        return True  # the grader's probe program (exec'd from a string), the interpreter
    if filename.startswith("<"):
        return False  # "<stdin>", "<ipython-input-...>": code the learner typed
    own = _course_package_folder()
    path = os.path.abspath(filename)
    roots = {os.path.abspath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return ("site-packages" in path or "dist-packages" in path or any(
        path.startswith(root + os.sep + "lib") for root in roots)
        or (own is not None and path.startswith(own + os.sep)))


def describe_error(error):
    """Facts about an exception the learner's code raised, for verify() to classify.

    ``kinds`` lists the exception's classes (most specific first), so verify() can ask
    "is it a NameError?" without matching message text. ``line`` is the last line of the
    learner's own code in the traceback (None when the error arose elsewhere), and
    ``raised_in`` the library file that raised it, e.g. 'torch/cuda/__init__.py'.
    """
    import linecache
    import traceback

    frames = traceback.extract_tb(error.__traceback__)
    codes = [frame.f_code for frame, _ in traceback.walk_tb(error.__traceback__)]
    learner = [(frame, code) for frame, code in zip(frames, codes, strict=True)
               if not _is_library_file(frame.filename)]
    line = None
    if learner:
        frame, code = learner[-1]
        text = (frame.line or linecache.getline(frame.filename, frame.lineno)).strip()
        line = LineFacts(lineno=frame.lineno, text=text[:200], function=frame.name, arguments=list(
            code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]))
    raised_in = None
    if frames and _is_library_file(frames[-1].filename):
        parts = frames[-1].filename.replace("\\", "/").split("/")
        anchor = max((i for i, part in enumerate(parts)
                      if part in ("site-packages", "dist-packages")), default=len(parts) - 3)
        raised_in = "/".join(parts[anchor + 1:])
    message = str(error)[:400]
    if isinstance(error, RecursionError):  # its wording depends on where the limit was hit
        message = "maximum recursion depth exceeded"
    return error_facts(
        type(error).__name__,
        [cls.__name__ for cls in type(error).__mro__ if cls not in (BaseException, object)],
        message,
        attribute=getattr(error, "name", None) if isinstance(error, AttributeError) else None,
        line=line, raised_in=raised_in)


def learner_line():
    """The innermost line of the learner's own code on the current call stack (a
    :class:`LineFacts`), or None when no learner code is running."""
    import linecache
    import traceback

    for frame in reversed(traceback.extract_stack()):
        if not _is_library_file(frame.filename):
            text = (frame.line or linecache.getline(frame.filename, frame.lineno)).strip()
            return LineFacts(lineno=frame.lineno, text=text[:200], function=frame.name)
    return None


class LearnerRun:
    """What one call of the learner's code did: its value, its error, or a stop."""

    def __init__(self, value=None, error=None, stopped=False):
        self.value = value
        self.error = error  # ErrorFacts, or None
        self.stopped = stopped  # a StopProbe ended it (the probe had seen enough)


def run_learner(function, *args, **kwargs):
    """Call the learner's ``function``; an exception becomes ``run.error``, never a crash."""
    try:
        return LearnerRun(value=function(*args, **kwargs))
    except StopProbe:
        return LearnerRun(stopped=True)
    except NotSimulated as gap:
        return LearnerRun(error=error_facts("NotSimulated", ["NotSimulated"], str(gap)))
    except Exception as error:  # noqa: BLE001 - the learner's code raised: report it as data
        return LearnerRun(error=describe_error(error))


def _number_kind(value):
    """'integral' or 'real' for a number of a type other than Python's own (e.g. numpy.int64),
    None for anything else."""
    import numbers

    if isinstance(value, bool) or not hasattr(value, "item"):
        return None
    if isinstance(value, numbers.Integral):
        return "integral"
    return "real" if isinstance(value, numbers.Real) else None


def whole_number(value):
    """``value`` as a Python int when it is a whole number of any integer type (not a bool),
    else None."""
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    return int(value)


def describe(value, max_values=64):
    """Plain, JSON-able facts about a value: type, then shape/dtype/device, then values."""
    import torch

    facts = {"type": type_name(value)}
    if isinstance(value, torch.Tensor):
        facts.update(
            shape=list(value.shape),
            dtype=str(value.dtype).replace("torch.", ""),
            device=str(value.device),
            requires_grad=bool(value.requires_grad),
            has_grad_fn=value.grad_fn is not None,
        )
        if value.device.type != "meta" and value.numel() <= max_values:
            facts["values"] = value.detach().to("cpu", torch.float64).flatten().tolist()
    elif isinstance(value, torch.nn.Module):
        params = list(value.parameters())
        facts.update(
            device=str(params[0].device) if params else None,
            devices=sorted({str(p.device) for p in params}),
            training=bool(value.training),
        )
    elif isinstance(value, torch.device):
        facts.update(device_type=value.type, index=value.index, text=str(value))
    elif isinstance(value, (bool, int, float, str)) or value is None:
        facts["value"] = value
    elif _number_kind(value):  # a NumPy scalar, say: the same number, another type
        facts.update(value=value.item(), number=_number_kind(value))
    elif isinstance(value, (list, tuple)):
        facts["items"] = [describe(item, max_values) for item in value[:max_values]]
    elif isinstance(value, dict):
        facts["items"] = {str(key): describe(item, max_values)
                          for key, item in list(value.items())[:max_values]}
    return facts
