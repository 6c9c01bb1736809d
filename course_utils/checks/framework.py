"""The check framework: one exercise's check is one small module built on this.

A check has three parts, kept apart so that the grader can run them in different
processes (docs/grading.md); docs/authoring.md walks through writing one.

* ``make_inputs(seed, hidden)`` -> JSON-able inputs chosen by the checker (fixed when
  visible, drawn from ``seed`` when hidden);
* ``probe(*answers, inputs)`` -> JSON-able observations of the learner's answer. It runs
  in the student's kernel, so it is self-contained: imports inside, and no names but those
  of :mod:`course_utils.probe`, whose source the grader sends along;
* ``verify(inputs, observations, hidden)`` decides, on the trusted side: it computes every
  expected value itself (or reads it from the instructor's ``solutions/``) and raises
  :class:`CheckFailure` through :func:`fail` or an ``expect_*`` helper, naming the cause
  and the fix. Code inside ``with case(name, weight):`` is one case with its own points.

In a notebook ``checks.check_x(answer)`` runs all three in the learner's kernel and prints
one line saying what was checked; the grader calls :meth:`Check.probe_expression` and
:meth:`Check.evaluate` instead.
"""
from __future__ import annotations

import contextvars
import inspect
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

from ..lab.args import is_real
from ..probe import ErrorFacts, bundle, describe_error
from .shapes import shape_problem

VISIBLE_SEED = 0


class CheckFailure(AssertionError):
    """A learner's answer is wrong; the message names the cause, then the fix."""


class GraderError(Exception):
    """A check's own bug: its observations had the declared shape (``observes``), yet verify()
    failed reading them. The grader reports it as ``error`` to the instructor; it is never
    blamed on the learner."""


# ---------------------------------------------------------------- verdicts

@dataclass(frozen=True)
class CaseResult:
    """One case of a check: what was tested, its weight, and the verdict."""

    name: str
    weight: float
    passed: bool
    message: str = ""


@dataclass(frozen=True)
class Verdict:
    """Everything one call of a check decided."""

    cases: tuple[CaseResult, ...]

    @property
    def passed(self) -> bool:
        return all(result.passed for result in self.cases)

    @property
    def fraction(self) -> float:
        """The share of the points earned: passed weight over total weight."""
        total = sum(result.weight for result in self.cases)
        return sum(r.weight for r in self.cases if r.passed) / total if total else 0.0

    @property
    def message(self) -> str:
        """The failures first (cause, then fix); '' when every case passed."""
        failed = [result for result in self.cases if not result.passed]
        if len(self.cases) == 1:
            return failed[0].message if failed else ""
        lines = [f"✘ {result.name}: {result.message}" for result in failed]
        passed = [result.name for result in self.cases if result.passed]
        if failed and passed:
            lines.append(f"✔ passed: {'; '.join(passed)}")
        return "\n".join(lines)


def score_fraction(calls: list[tuple[bool, Verdict]]) -> float:
    """The share of a test cell's points earned, from its (hidden, verdict) check calls.

    The hidden calls decide when there are any: their inputs are drawn afresh at every grading
    run and cover what the visible call tests, so hard-coding the visible answers earns
    nothing. The visible call is the learner's preview. Within the deciding calls, each case
    counts by its weight.
    """
    deciding = [verdict for hidden, verdict in calls if hidden] or [v for _, v in calls]
    cases = [result for verdict in deciding for result in verdict.cases]
    return Verdict(tuple(cases)).fraction if cases else 0.0


_collector: contextvars.ContextVar[list[CaseResult] | None] = contextvars.ContextVar(
    "case_results", default=None)


@contextmanager
def case(name: str, weight: float = 1.0) -> Iterator[None]:
    """One case of a check, with its own share of the points.

    A failure inside the block fails this case only and verify() goes on with the next;
    a failure outside every case fails the whole check.
    """
    results = _collector.get()
    if results is None:
        raise RuntimeError("case() is used inside a check's verify(), run by Check.evaluate().")
    try:
        yield
    except CheckFailure as failure:
        results.append(CaseResult(name, weight, False, str(failure)))
    else:
        results.append(CaseResult(name, weight, True))


# ---------------------------------------------------------------- checks

@dataclass(frozen=True)
class Outside:
    """For a check whose probe runs the learner's code in ways a grader must not leave to the
    learner's kernel (lesson 07 launches the learner's script with torchrun): when grading,
    ``probe`` runs in the kernel instead of the check's own probe and returns only what the
    work needs (a script's text); then ``gather(inputs, facts, sandbox)`` does the work on
    the grader's side, running learner code only through ``sandbox`` (the grading sandbox,
    with the kernel's limits: checks.distributed.trial.Sandbox), and returns the observations
    that ``verify`` reads, as the check's own probe would have. In a notebook the check's own
    probe runs, in the kernel."""

    probe: Callable[..., Any]
    gather: Callable[[Any, Any, Any], Any]


@dataclass(frozen=True)
class Check:
    """One registered check; calling it checks answers in this process."""

    name: str
    make_inputs: Callable[[int, bool], Any]
    probe: Callable[..., Any]
    verify: Callable[[Any, Any, bool], None]
    success: str | Callable[[Any], str]
    n_answers: int = 1
    outside: Outside | None = None  # work the grader does itself (see Outside)
    observes: Any = None  # the probe's observations' type (checks/shapes.py), None: unchecked
    rerun_alone: bool = True  # graded, the probe runs again away from the notebook (clean_run)

    def success_line(self, inputs: Any) -> str:
        """What a pass means for these inputs: exactly what was tested."""
        return self.success(inputs) if callable(self.success) else self.success

    def evaluate(self, inputs: Any, observations: Any, hidden: bool) -> Verdict:
        """Run verify() on the trusted side; never raises for the learner's faults."""
        results: list[CaseResult] = []
        token = _collector.set(results)
        try:
            _expect_probe_ran(observations)
            problem = None if self.observes is None else shape_problem(observations,
                                                                        self.observes)
            if problem is not None:
                return _incomplete(self.name, f"{problem}, not what the probe reports")
            self.verify(inputs, observations, hidden)
        except CheckFailure as failure:  # outside every case: the whole check fails
            return Verdict((CaseResult(self.name, 1.0, False, str(failure)),))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
            if self.observes is not None:  # the shape was right: the check's own bug
                raise GraderError(f"{self.name}'s verify() failed on observations of the "
                                  f"declared shape: {type(error).__name__}: {error}") from error
            # Observations that do not have the probe's shape: forged or tampered with.
            return _incomplete(self.name, type(error).__name__)
        finally:
            _collector.reset(token)
        return Verdict(tuple(results) or (CaseResult(self.name, 1.0, True),))

    def __call__(self, *answers: Any, hidden: bool = False, seed: int | None = None) -> None:
        """Check answers in this process: print what passed, or raise CheckFailure."""
        if len(answers) != self.n_answers:
            raise TypeError(f"{self.name} takes {self.n_answers} answer(s), got {len(answers)}.")
        inputs = self.make_inputs(VISIBLE_SEED if seed is None else seed, hidden)
        observations = run_probe(self.probe, answers, inputs)
        verdict = self.evaluate(inputs, observations, hidden)
        if not verdict.passed:
            raise CheckFailure(verdict.message).with_traceback(None)
        print(f"✔ {self.success_line(inputs)}")

    def probe_expression(self, answer_names: tuple[str, ...], inputs: Any,
                         probe: Callable[..., Any] | None = None,
                         kit: tuple[str, ...] = bundle.MODULES) -> str:
        """An expression that runs the probe (default: the check's own) in the user namespace
        and returns JSON text; ``kit``: the probe kit's modules it needs (all by default).

        The grader evaluates it as an IPython user expression in the student's kernel. Every
        name it uses is its own but the answers': ``exec`` is read from the builtins (a
        function's ``__builtins__``), never looked up among the learner's globals, where a
        global named ``exec`` would run instead and could forge the result.
        """
        probe = probe or self.probe
        program = "\n".join([
            bundle.source(kit),
            inspect.getsource(probe),
            "import json as _json",
            f"_inputs = _json.loads({json.dumps(inputs)!r})",
            "try:",
            f"    result = _json.dumps({probe.__name__}(*answers, _inputs))",
            "except Exception as error:",
            "    result = _json.dumps({'probe_error': describe_error(error)})",
        ])
        answers = "".join(f"{name}," for name in answer_names)
        run = f"(lambda: 0).__builtins__['exec']({program!r}, ns)"
        return f"(lambda ns: ({run}, ns['result'])[1])({{'answers': ({answers})}})"


def _incomplete(name: str, why: str) -> Verdict:
    return Verdict((CaseResult(name, 1.0, False, (
        f"The answer could not be checked: the check's data were incomplete or forged ({why})."
        "\nHow to fix it: run the notebook from a fresh kernel without redefining the course's "
        "functions, then run the check again.")),))


REGISTRY: dict[str, Check] = {}


def check(*, success: str | Callable[[Any], str], make_inputs: Callable[[int, bool], Any],
          probe: Callable[..., Any], n_answers: int = 1,
          outside: Outside | None = None, observes: Any = None,
          rerun_alone: bool = True) -> Callable[[Callable], Check]:
    """Decorator: register ``verify`` as the check named after it (``check_<exercise>``);
    ``observes``: the type of what the probe reports, validated before verify (shapes.py);
    ``rerun_alone=False``: the probe needs the notebook's kernel (say why where it is set)."""

    def register(verify: Callable[[Any, Any, bool], None]) -> Check:
        name = verify.__name__
        if name in REGISTRY:
            raise RuntimeError(f"Two checks are named {name!r}; names must be unique.")
        REGISTRY[name] = Check(name, make_inputs, probe, verify, success, n_answers, outside,
                               observes, rerun_alone)
        return REGISTRY[name]

    return register


def run_probe(probe: Callable[..., Any], answers: tuple, inputs: Any) -> Any:
    """Run a probe in this process, as the grader would: JSON in, JSON out."""
    inputs = json.loads(json.dumps(inputs))
    try:
        observations = probe(*answers, inputs)
    except Exception as error:  # noqa: BLE001 - the probe itself failed on these answers
        observations = {"probe_error": describe_error(error)}
    return json.loads(json.dumps(observations))


def _expect_probe_ran(observations: Any) -> None:
    if isinstance(observations, dict) and "probe_error" in observations:
        error = observations["probe_error"]
        fail(f"The check could not run on your answer: it raised {error['type']}: "
             f"{error['message']}.",
             "make sure the answer cell defines what the exercise asks for (a function with "
             "the right name and arguments), run it, then run the check again.")


# ---------------------------------------------------------------- verify vocabulary
# Order inside a verify: errors, then type, shape, dtype, device, then values.

def fail(cause: str, fix: str) -> NoReturn:
    """Raise a :class:`CheckFailure` whose message has the cause, then the fix."""
    raise CheckFailure(f"{cause}\nHow to fix it: {fix}")


def is_kind(error: ErrorFacts | None, kind: str) -> bool:
    """Whether a reported error is of exception class ``kind`` (or a subclass of it)."""
    return error is not None and kind in error["kinds"]


def where_in_code(error: ErrorFacts) -> str:
    """' at line 3 of pick_device: `return device`', or '' when not in the learner's code."""
    line = error.get("line")
    if not line:
        return ""
    return f" at line {line['lineno']} of {line['function']}: `{line['text']}`"


Hint = str | Callable[[ErrorFacts], str | None]


def is_stub(error: ErrorFacts | None) -> bool:
    """The exercise's own ``raise NotImplementedError()``, left in place."""
    return error is not None and is_kind(error, "NotImplementedError") and \
        error["raised_in"] is None


def expect_not_a_stub(errors: list[ErrorFacts | None], what: str) -> None:
    """One message, not one per case, when every case met the exercise's stub."""
    if errors and all(map(is_stub, errors)):
        expect_no_error(errors[0], what)


def expect_no_error(error: ErrorFacts | None, what: str, *, where: str = "",
                    hints: Mapping[str, Hint] | None = None) -> None:
    """Fail when the learner's code raised, with the fix for its kind of exception.

    ``hints`` maps exception class names to a fix (or to a function of the error returning
    one, or None to fall through); the first class of the error's kinds found wins.
    """
    if error is None:
        return
    prefix = f"{where}, " if where else ""
    if is_stub(error):
        fail(f"{prefix}{what} is not implemented yet (it raises NotImplementedError).",
             "replace `raise NotImplementedError()` with your code and run the cell again.")
    if error["type"] == "NotSimulated":
        fail(f"{prefix}{what} called {error['message']}, which this check does not simulate: "
             "the check runs your code on simulated machines that answer torch's usual device "
             "queries (availability, device count, current device, names, properties, memory "
             "information).",
             "use those queries (e.g. torch.cuda.is_available(), torch.backends.mps."
             "is_available(), torch.accelerator.current_accelerator()) to decide.")
    for kind in error["kinds"]:
        hint = (hints or {}).get(kind)
        fix = hint(error) if callable(hint) else hint
        if fix:
            break
    else:
        fix = (f"call {what} on a small input in a new cell and read the traceback." if
               "(" in what else "run the cell on a small input and read the traceback.")
    fail(f"{prefix}{what} raised {error_summary(error)}{where_in_code(error)}"
         f"{never_assigned(error)}.", fix)


def never_assigned(error: ErrorFacts) -> str:
    """For a NameError in a function of the learner's: '; f() assigns x nowhere, and its
    arguments are a and b' (a name it assigned anywhere would be its local, and reading it
    unset an UnboundLocalError), or ''."""
    line = error.get("line")
    missing = re.fullmatch(r"name '(\w+)' is not defined", error["message"])
    if error["type"] != "NameError" or not line or not missing or "arguments" not in line \
            or not line["function"].isidentifier():
        return ""
    arguments = [f"`{name}`" for name in line["arguments"]]
    return f"; {line['function']}() assigns `{missing[1]}` nowhere, and " + (
        f"its arguments are {', '.join(arguments[:-1])} and {arguments[-1]}" if len(arguments) > 1
        else f"its argument is {arguments[0]}" if arguments else "it takes no arguments")


def error_summary(error: ErrorFacts) -> str:
    """'TypeError: message' (or just the type when the message is empty), without a final dot."""
    message = error["message"].strip().rstrip(".")
    return f"{error['type']}: {message}" if message else error["type"]


def expect_type(facts: Mapping[str, Any], expected: str | tuple[str, ...], what: str,
                fix: str) -> None:
    """``facts`` from probe.describe(); ``expected`` type names ('Tensor', 'float')."""
    names = (expected,) if isinstance(expected, str) else expected
    if facts["type"] not in names:
        fail(f"{what} is {a(facts['type'])}, not {' or '.join(a(name) for name in names)}.", fix)


def expect_shape(facts: Mapping[str, Any], shape: list[int], what: str, fix: str) -> None:
    if list(facts["shape"]) != list(shape):
        fail(f"{what} has shape {tuple(facts['shape'])}, not {tuple(shape)}.", fix)


def expect_dtype(facts: Mapping[str, Any], dtype: str, what: str, fix: str) -> None:
    if facts["dtype"] != dtype:
        fail(f"{what} has dtype {facts['dtype']}, not {dtype}.", fix)


def expect_device(device: str | None, expected: str, what: str, fix: str) -> None:
    """Devices as strings: 'cpu', 'meta', 'cuda:0'."""
    if device != expected:
        fail(f"{what} is on {device!r}, not on {expected!r}.", fix)


def expect_close(value: Any, expected: float, what: str, fix: str, *, rel: float = 1e-4,
                 abs_tol: float = 1e-6, reveal: bool = True) -> None:
    """Compare numbers; ``reveal=False`` (hidden cases) keeps the expected value secret."""
    if not is_real(value) or not math.isclose(value, expected, rel_tol=rel, abs_tol=abs_tol):
        shown = f" (expected about {expected:.6g})" if reveal else ""
        fail(f"{what} is {value!r}{shown}.", fix)


def a(noun: str) -> str:
    """'a list', 'an int', 'None' for NoneType, 'a NumPy array' for ndarray."""
    special = {"NoneType": "None", "ndarray": "a NumPy array"}
    if noun in special:
        return special[noun]
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"
