"""The check API: the grading lines that call the check framework (course_utils.checks).

One call of a check, graded (:func:`run_check`): the answer is probed where the learner's other
cells cannot reach it, then, if it fell short there, in the learner's kernel too.

1. **Alone** (every check but lesson 07's ``ddp_script``, which the grader launches itself, and
   any that declares ``rerun_alone=False``): the kernel sends the answers as source
   (``probe.portable_answers``), and the worker's alone process (alone.py, checks/clean_run.py)
   rebuilds them in a fork that no notebook touched and runs the check's probe there. Full
   marks there end the call (nothing the notebook did can have helped), and so does any
   verdict of a call that decides no points (a visible call beside hidden ones: its message
   is feedback only).
2. **In the kernel**, otherwise: the probe as before. Where the answer also ran alone, the
   verdict is still the alone one, and a kernel that scores more (the notebook changed what the
   check saw: a forgery, or an honest answer that needs something the fresh process lacks)
   flags the notebook for review with both figures. Where the answer could not run alone (it
   reads a notebook tensor, an error or a time-out there), the kernel's verdict stands, and is
   flagged when it earns points the alone run could not confirm.

Imported on first use: the checks import torch, and a worker starts its first kernel before.
"""
from __future__ import annotations

import json
from typing import Any

from .outside import OutsideSandbox
from .received import literal_string
from .session import CellTimeout, KernelSession, ProbeUnavailable
from .testcells import CheckCall


def run_check(session: KernelSession, call: CheckCall, seed: int,
              outside: OutsideSandbox | None = None):
    """The Verdict of one call, or the message of why the answer could not be checked at all
    (it then scores 0). ``outside``: the grader's side, lent when grading (None: the kernel's
    observations alone, as in the learner's notebook)."""
    from ..checks import REGISTRY

    check = REGISTRY.get(call.check_name)
    if check is None:
        return f"internal: unknown check {call.check_name!r}"
    inputs = check.make_inputs(seed, call.hidden)
    alone, why_not, by_itself = None, "", None
    if outside is not None and check.outside is None and check.rerun_alone:
        alone, why_not = _observed_alone(session, check, call, inputs, outside)
        by_itself = None if alone is None else _judged(check, inputs, alone, call.hidden)
        if isinstance(by_itself, str):  # what came back was not what the probe reports
            alone, why_not, by_itself = None, by_itself, None
        elif by_itself is not None and (by_itself.fraction == 1 or not outside.decides):
            return by_itself  # nothing the notebook did helped; or no points hang on it
    observed = _observed_in_kernel(session, check, call, inputs, outside)
    in_kernel = observed if isinstance(observed, str) else \
        _judged(check, inputs, observed, call.hidden)
    if outside is None or not outside.decides or isinstance(in_kernel, str) \
            or in_kernel.fraction == 0:
        return in_kernel if by_itself is None else by_itself
    exercise = check.name.removeprefix("check_")
    if by_itself is None:
        if why_not:
            outside.note_review(f"{exercise}: its answer did not run alone in a fresh process "
                                f"({why_not}); graded on what its notebook's kernel showed")
        return in_kernel
    if in_kernel.fraction > by_itself.fraction:
        outside.note_review(f"{exercise}: its answer passed {in_kernel.fraction:.0%} of the "
                            f"checks in its notebook and {by_itself.fraction:.0%} run alone in "
                            "a fresh process (graded so): something in the notebook changed "
                            "what the check saw")
    return by_itself


def _observed_alone(session: KernelSession, check, call: CheckCall, inputs: Any,
                    outside: OutsideSandbox) -> tuple[Any, str]:
    """(the fresh process's observations, "") or (None, why there are none: "" when the
    answer cannot be sent at all, which is no one's fault)."""
    from ..checks import clean_run
    from ..probe import bundle

    try:
        portable = json.loads(literal_string(session.evaluate(check.probe_expression(
            call.answer_names, inputs, clean_run.portable_of, kit=bundle.PORTABLE))))
    except (ProbeUnavailable, ValueError, TypeError, RecursionError):
        return None, ""  # the kernel's probe says what is wrong
    if not isinstance(portable, dict) or portable.get("missing") or not portable.get("names"):
        return None, ""
    observed, why = outside.observe_alone(check.name, portable, inputs)
    if isinstance(observed, dict) and "probe_error" in observed:
        error = observed["probe_error"]
        return None, (f"{error.get('type', 'an error')}: {str(error.get('message', ''))[:160]}"
                      if isinstance(error, dict) else "an error")
    return observed, why


def _observed_in_kernel(session: KernelSession, check, call: CheckCall, inputs: Any,
                        outside: OutsideSandbox | None):
    """The probe's observations from the learner's kernel (and, for a check with work the
    kernel must not do, checks.framework.Outside, that work done here), or why there are
    none."""
    lent = check.outside if outside is not None else None
    try:
        text = session.evaluate(check.probe_expression(call.answer_names, inputs,
                                                       lent.probe if lent else None))
        observations = json.loads(literal_string(text))
    except ProbeUnavailable as error:
        names = ", ".join(call.answer_names)
        return (f"could not check {names}: {error}. Define it in its answer cell and "
                "make sure the notebook runs top to bottom.")
    except (ValueError, TypeError, RecursionError):
        return "the probe's answer was not valid data (was the kernel tampered with?)"
    if lent is not None and isinstance(observations, dict) and "probe_error" not in observations:
        try:
            observations = lent.gather(inputs, observations, outside)
        except CellTimeout:
            raise
        except Exception as error:  # noqa: BLE001 - learner code's trial fails this check only
            return f"the answer could not be checked ({type(error).__name__}); it scores 0"
    return observations


def score_fraction(verdicts) -> float:
    """The share of the deciding cases passed (checks.framework.score_fraction)."""
    from ..checks.framework import score_fraction as share

    return share(verdicts)


def _judged(check, inputs: Any, observations: Any, hidden: bool):
    from ..checks import framework

    try:
        return check.evaluate(inputs, observations, hidden)
    except framework.GraderError:  # the check's own bug: the notebook's status is `error`
        raise
    except Exception as error:  # noqa: BLE001 - malformed observations fail closed
        return f"the answer could not be checked ({type(error).__name__}); it scores 0"
