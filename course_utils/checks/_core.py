"""The machinery behind every learner-facing check.

A check has three parts, kept apart so that the grader can run them in
different processes (see docs/grading.md):

* ``make_inputs(seed, hidden)`` -> JSON-able inputs chosen by the checker;
* ``probe(*answers, inputs)`` -> JSON-able observations of the learner's answer.
  A probe is a self-contained function (imports inside, no closures) because the
  grader sends its source to the student's kernel;
* ``verify(inputs, observations)`` -> None, or raises :class:`CheckFailure`
  naming the cause and the fix. It never runs in the student's kernel when grading.

In a notebook, ``checks.check_x(answer)`` runs all three in the learner's kernel
and prints one short line on success.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from ._probe_support import error_text

VISIBLE_SEED = 0


class CheckFailure(AssertionError):
    """A learner's answer is wrong; the message names the cause and the fix."""


@dataclass(frozen=True)
class Check:
    """One registered check; calling it checks answers in-process."""

    name: str
    probe: Callable[..., Any]
    verify: Callable[[Any, Any], None]
    make_inputs: Callable[[int, bool], Any]
    success: str
    n_answers: int = field(default=1)

    def __call__(self, *answers: Any, hidden: bool = False, seed: int | None = None) -> None:
        if len(answers) != self.n_answers:
            raise TypeError(
                f"{self.name} takes {self.n_answers} answer(s), got {len(answers)}."
            )
        inputs = self.make_inputs(VISIBLE_SEED if seed is None else seed, hidden)
        observations = run_probe(self.probe, answers, inputs)
        self.verify(inputs, observations)
        print(f"✔ {self.success}")

    @property
    def probe_source(self) -> str:
        """The probe's source, to be sent to a kernel by the grader."""
        return inspect.getsource(self.probe)


REGISTRY: dict[str, Check] = {}


def check(*, success: str, make_inputs: Callable[[int, bool], Any] | None = None,
          probe: Callable[..., Any], n_answers: int = 1) -> Callable[[Callable], Check]:
    """Decorator: register ``verify`` as the check named after it."""

    def register(verify: Callable[[Any, Any], None]) -> Check:
        name = verify.__name__
        if name in REGISTRY:
            raise RuntimeError(f"Two checks are named {name!r}; names must be unique.")
        made = Check(
            name=name,
            probe=probe,
            verify=verify,
            make_inputs=make_inputs or (lambda seed, hidden: {"seed": seed, "hidden": hidden}),
            success=success,
            n_answers=n_answers,
        )
        REGISTRY[name] = made
        return made

    return register


def run_probe(probe: Callable[..., Any], answers: tuple, inputs: Any) -> Any:
    """Run a probe in this process; a crash in the learner's code becomes an observation."""
    try:
        return probe(*answers, inputs)
    except CheckFailure:
        raise
    except Exception as error:  # the learner's code raised: report it, don't crash the check
        return {"probe_error": error_text(error)}


# ---------------------------------------------------------------- verify helpers
# Order of checks in a verify: type, then shape, then device, then value.

def fail(cause: str, fix: str) -> None:
    """Raise a :class:`CheckFailure` whose message has the cause, then the fix."""
    raise CheckFailure(f"{cause}\nHow to fix it: {fix}")


def expect_no_probe_error(observations: Any, what: str) -> None:
    """Fail when the probe reported that the learner's code raised."""
    if isinstance(observations, dict) and "probe_error" in observations:
        error = observations["probe_error"]
        if "NotImplementedError" in error:
            fail(f"{what} is not implemented yet (it raised NotImplementedError).",
                 "replace `raise NotImplementedError()` with your code and run the cell again.")
        fail(f"{what} raised {error}.", "run it on a small input in a new cell and read the traceback.")


def expect_one_result_per_case(cases: list, results: Any, what: str) -> None:
    """Fail unless the probe reported exactly one result per case (anything else is tampering)."""
    if not isinstance(results, list) or len(results) != len(cases):
        fail(f"{what} could not be checked on every case (the check's data was incomplete).",
             "run the notebook from a fresh kernel without redefining the course's functions.")


def expect_type(value_type: str, expected: str | tuple[str, ...], what: str, fix: str) -> None:
    expected_names = (expected,) if isinstance(expected, str) else expected
    if value_type not in expected_names:
        fail(f"{what} should be a {' or '.join(expected_names)}, but it is a {value_type}.", fix)


def expect_shape(shape: list[int], expected: list[int], what: str, fix: str) -> None:
    if list(shape) != list(expected):
        fail(f"{what} should have shape {tuple(expected)}, but it has shape {tuple(shape)}.", fix)


def expect_device(device: str, expected: str, what: str, fix: str) -> None:
    if device != expected:
        fail(f"{what} should be on device {expected!r}, but it is on {device!r}.", fix)


def expect_close(value: float, expected: float, what: str, fix: str, *,
                 rel: float = 1e-4, abs_tol: float = 1e-6, reveal: bool = True) -> None:
    """Compare numbers; ``reveal=False`` keeps the expected value out of the message."""
    if not isinstance(value, (int, float)) or not math.isclose(value, expected, rel_tol=rel,
                                                                abs_tol=abs_tol):
        shown = f" (expected about {expected:.6g})" if reveal else ""
        fail(f"{what} is {value!r}{shown}.", fix)
