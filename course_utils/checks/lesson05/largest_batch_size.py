"""largest_batch_size(step, start): halve until step() fits, retrying outside the except block."""
from __future__ import annotations

import random

from ...probe import StopProbe, describe, run_learner, whole_number
from ..framework import case, check, expect_no_error, fail, is_kind
from .largest_batch_size_rules import (
    halving_sizes,
    never_called,
    success,
    tried_sizes,
)

HINTS = {"OutOfMemoryError": "catch torch.OutOfMemoryError around the step, then try half.",
         "ValueError": "step() takes whole numbers >= 1: halve with `batch_size // 2`."}


def make_inputs(seed: int, hidden: bool) -> dict:
    if not hidden:
        return {"fits": [{"start": 512, "limit": 100}], "nothing": {"start": 8, "limit": 0},
                "bug": {"start": 256, "limit": 100, "bug_at": 128}}
    rng = random.Random(seed)
    start, bug_start = rng.randrange(65, 3000), rng.randrange(64, 1000)
    return {"fits": [{"start": start, "limit": rng.randrange(1, start // 4)},
                     {"start": rng.randrange(8, 100), "limit": 100}],
            "nothing": {"start": rng.randrange(2, 40), "limit": 0},
            "bug": {"start": bug_start, "limit": bug_start // 3, "bug_at": bug_start // 2}}


def probe(largest_batch_size, inputs):
    """Run the answer on steps that run out of memory above a limit; record every call."""
    import inspect
    import sys
    import weakref

    import torch

    def scenario_run(scenario):
        calls, failed, raised = [], [], []

        def out_of_memory(size):  # built here, so that no frame of the step refers to it
            error = torch.OutOfMemoryError(f"Tried to allocate memory for a batch of {size} "
                                           "(out of memory, simulated by the check)")
            raised.append(weakref.ref(error))
            return error

        def step(batch_size):
            if len(calls) >= 30:
                raise StopProbe()
            handling = sys.exc_info()[1]  # an error of ours: step() runs in its except block
            calls.append({"size": describe(batch_size),
                          "held": sum(ref() is not None for ref in failed),
                          "in_except": any(handling is ref() for ref in raised if handling)})
            del handling
            if whole_number(batch_size) is None or batch_size < 1:
                raise ValueError(f"batch_size should be a positive integer, got {batch_size!r}")
            if batch_size == scenario.get("bug_at"):
                raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (a bug, simulated)")
            activations = torch.empty(batch_size)  # what the failed step's frame holds on to
            if batch_size > scenario["limit"]:
                failed.append(weakref.ref(activations))
                raise out_of_memory(batch_size)

        turns = [0]  # how often the answer's own code went back to an earlier line: a loop

        def frame_tracer(frame):
            last = [frame.f_lineno]

            def on_line(frame, event, arg):
                if event == "line":
                    turns[0] += frame.f_lineno <= last[0]
                    last[0] = frame.f_lineno
                    if turns[0] == 100_000:  # far past any search's: a loop that does not
                        raise StopProbe()  # end, stopped and said so (at 100 000 turns)
                return on_line
            return on_line

        own = getattr(inspect.unwrap(largest_batch_size), "__code__", None)  # through wraps()
        previous = sys.gettrace()
        sys.settrace(lambda frame, event, arg: frame_tracer(frame) if frame.f_code is own else None)
        try:
            run = run_learner(largest_batch_size, step, scenario["start"])
        finally:
            sys.settrace(previous)
        return {"returned": describe(run.value), "error": run.error, "stopped": run.stopped,
                "calls": calls, "loop_turns": turns[0],
                "loop_stopped": turns[0] == 100_000}

    return {"fits": [scenario_run(s) for s in inputs["fits"]],
            "nothing": scenario_run(inputs["nothing"]), "bug": scenario_run(inputs["bug"])}


@check(success=success, make_inputs=make_inputs, probe=probe)
def check_largest_batch_size(inputs, observations, hidden):
    expect_no_error(observations["fits"][0]["error"], "largest_batch_size()", hints=HINTS)
    with case("halves from start and returns the first size that fits", 2):
        for scenario, result in zip(inputs["fits"], observations["fits"], strict=True):
            where = f"Starting at {scenario['start']}"
            expect_no_error(result["error"], "largest_batch_size()", where=where, hints=HINTS)
            sizes, halvings = tried_sizes(result, where), halving_sizes(scenario["start"])
            fitting = next(s for s in halvings if s <= scenario["limit"])
            if sizes != halvings[:halvings.index(fitting) + 1]:
                fail(f"{where}, largest_batch_size() tried {sizes}" + (
                     never_called(result) if not sizes else "") + ".",
                     "try `start` first, then half of it after each out-of-memory error "
                     "(`batch_size // 2`), and return as soon as a step runs.")
            returned = result["returned"]
            if returned.get("value") != fitting or not (
                    returned["type"] == "int" or returned.get("number") == "integral"):
                fail(f"{where}, largest_batch_size() returned {result['returned'].get('value')!r}"
                     f" after step({fitting}) ran.", "return the batch size that ran.")
    with case("retries outside the except block, the failed step's memory released", 2):
        calls = [c for r in [*observations["fits"], observations["nothing"]] for c in r["calls"]]
        if any(call["in_except"] for call in calls):
            fail("largest_batch_size() called step() again inside the `except` block. There the "
                 "exception's traceback still holds the failed step's frames, and with them its "
                 "tensors: on a GPU, the retry runs with that memory still taken.",
                 "in the except block, only note the failure; halve and retry after it.")
        if any(call["held"] for call in calls):
            fail("When largest_batch_size() retried, the failed step's tensors were still alive: "
                 "something still refers to the exception (`last_error = e`, a list of errors), "
                 "and its traceback holds the failed step's frames.",
                 "do not keep the exception; retry after the except block.")
    with case("raises when even a batch of 1 runs out of memory", 1):
        where = f"When nothing fits (from {inputs['nothing']['start']})"
        result = observations["nothing"]
        sizes = tried_sizes(result, where)
        if result["error"] is None:
            fail(f"{where}, largest_batch_size() returned {result['returned'].get('value')!r}.",
                 "when step(1) fails too there is no batch size to return: raise an error "
                 "(re-raising the out-of-memory error is simplest).")
        halvings = halving_sizes(inputs["nothing"]["start"])
        if sizes != halvings:
            went_on = sizes[:len(halvings)] == halvings
            fail(f"{where}, largest_batch_size() tried {sizes} before raising" + (
                 f": step(1) ran out of memory too, and it did not raise (or re-raise) then "
                 f"but went on to step({sizes[len(halvings)]})" if went_on else
                 f": it gave up before trying {halvings[len(sizes)]}" if sizes == halvings[
                     :len(sizes)] else "") + ".",
                 "halve after each failure down to 1, then raise.")
    with case("lets an error that is not out-of-memory through", 1):
        result, bug = observations["bug"], inputs["bug"]["bug_at"]
        sizes = [call["size"].get("value") for call in result["calls"]]
        if sizes[-1:] != [bug] or not is_kind(result["error"], "RuntimeError") \
                or is_kind(result["error"], "OutOfMemoryError"):
            fail(f"step({bug}) raised a RuntimeError that is not out-of-memory (a bug), and "
                 f"largest_batch_size() went on: it tried {sizes}.",
                 "catch torch.OutOfMemoryError only: `except RuntimeError` or `except "
                 "Exception` also catches bugs, which must reach you.")
