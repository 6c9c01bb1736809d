"""score() without graph breaks; compile_for_batches(): one compilation for every batch size.
Graphs are counted by a backend that runs them as captured: Dynamo only, never Inductor."""
from __future__ import annotations

import random

from ...probe import Spy, run_learner, type_name
from .. import references
from ..framework import case, check, expect_no_error, fail
from . import compile_ready_rules as rules

NO_BREAK = ("keep the largest magnitude on the device (scores.abs().amax()) and choose with "
            "tensor operations: torch.where(largest > 10, scores * (10 / largest), scores), "
            "or scores * (10 / largest.clamp(min=10)); no print.")
PLAIN = {"generic_jump": "a Python `if` on a tensor's value", "builtin": "a Python built-in such "
         "as print", "item()": "a tensor's value brought to Python"}  # Dynamo's words, in plain


def make_inputs(seed: int, hidden: bool) -> dict:
    """Largest |score| per batch: just under, just over, far under, far over the threshold 10."""
    rng = random.Random(3000 + seed if hidden else 8)
    # 7 and up: a size equal to the weight's 5 or 6 would share its symbol (Dynamo's duck sizing)
    sizes = sorted(rng.sample(range(7, 40), 4)) if hidden else [4, 8, 12, 16]
    weight = [[round(rng.uniform(-1, 1), 3) for _ in range(5)] for _ in range(6)]
    largest = rng.sample([rng.uniform(9.3, 9.9), rng.uniform(10.1, 10.7), rng.uniform(2, 6),
                          rng.uniform(20, 60)], 4) if hidden else [9.5, 10.5, 4.0, 40.0]
    return {"weight": weight, "batches": [references.matrix_with_largest_product(
        rng, n, weight, target) for n, target in zip(sizes, largest, strict=True)]}


def probe(score, compile_for_batches, inputs):
    """Explain score(); compile a break-free score with the learner's function and count graphs."""
    import contextlib
    import io
    import logging

    import torch._dynamo  # binds torch too

    weight, batches = torch.tensor(inputs["weight"]), [torch.tensor(b) for b in inputs["batches"]]
    quiet = logging.getLogger("torch._dynamo")
    level, quiet.level = quiet.level, logging.ERROR  # graph-break warnings are data here
    try:
        values, score_error, breaks = [], None, None
        with contextlib.redirect_stdout(io.StringIO()):  # the learner's prints are no output
            for x in batches:
                run = run_learner(score, x, weight)
                values.append(run.value.tolist() if isinstance(run.value, torch.Tensor) else None)
                score_error = score_error or run.error
            if score_error is None:
                torch._dynamo.reset()
                explained = run_learner(lambda: torch._dynamo.explain(score)(batches[0], weight))
                if explained.value is not None:
                    breaks = [r.reason.strip().splitlines()[0][:160]
                              for r in explained.value.break_reasons]

        def reference(x, w):  # break-free: the learner's compile_for_batches is judged alone
            return (x @ w).softmax(dim=-1)

        graphs, asked = [], []

        def counting(graph_module, example_inputs):
            graphs.append(len(graph_module.graph.nodes))
            return graph_module.forward

        def compile_counting(original, *args, **kwargs):  # never Inductor, whatever was asked
            asked.append({"backend": type_name(kwargs.get("backend")), **{
                key: kwargs.get(key) for key in ("dynamic", "fullgraph", "mode")}})
            kwargs = {k: v for k, v in kwargs.items() if k in ("dynamic", "fullgraph")}
            return original(*args[:1], backend=counting, **kwargs)

        torch._dynamo.reset()
        with Spy(torch, "compile", replacement=compile_counting):
            made = run_learner(compile_for_batches, reference, counting)
        calls, failed = [], None
        if made.error is None and callable(made.value):
            for x in batches:
                before, run = len(graphs), run_learner(made.value, x, weight)
                if (failed := run.error) is not None:
                    break
                calls.append(len(graphs) - before)
        torch._dynamo.reset()
    finally:
        quiet.level = level
    return {"score_error": score_error, "values": values, "breaks": breaks,
            "compile_error": made.error, "returned": type_name(made.value),
            "asked": asked, "compiled_per_call": calls, "call_error": failed}


def _success(inputs: dict) -> str:
    sizes = ", ".join(str(len(b)) for b in inputs["batches"])
    return (f"score() matches the original on batches of {sizes} with no graph break, and "
            f"compile_for_batches() compiled once for all of them (graphs counted, no Inductor).")


# Graded, the probe runs again in a fresh process on the answers' source (as every check's
# does): the graph breaks are what Dynamo finds there, whatever the notebook's other cells
# patched (checks/clean_run.py).
@check(success=_success, make_inputs=make_inputs, probe=probe, n_answers=2)
def check_compile_ready(inputs, observations, hidden):
    with case("score(): the original's values, no graph break"):
        _verify_score(inputs, observations)
    with case("compile_for_batches(): one compilation for every batch size"):
        _verify_compile(inputs, observations)


def _verify_score(inputs: dict, seen: dict) -> None:
    import torch  # here: the grader imports checks without torch
    expect_no_error(seen["score_error"], "score(x, weight)")
    batches = list(zip(inputs["batches"], seen["values"], rules.expected_scores(inputs),
                       strict=False))
    for batch, got, (expected, _, _) in batches:
        if got is None or list(torch.tensor(got).shape) != list(expected.shape):
            fail(f"score() on a batch of {len(batch)} did not return a tensor of shape "
                 f"{list(expected.shape)}.", "return the softmax of the scores over dim=-1.")
    every = [(torch.tensor(got, dtype=torch.float64), scores) for _, got, (_, scores, _) in batches]
    for (values, _), (_, _, (expected, scores, largest)) in zip(every, batches, strict=True):
        if not torch.allclose(values, expected, atol=1e-4):
            fail(rules.what_differs(values, scores, largest, every),
                 "scale by 10 / largest only when largest > 10, then softmax over dim=-1.")
    if seen["breaks"] is None:
        fail("torch._dynamo.explain could not run score().", NO_BREAK)
    if seen["breaks"]:
        fail(f"score() has {len(seen['breaks'])} graph break(s); Dynamo says: " + " | ".join(
            f"{said} ({PLAIN[key]})" if (key := next((k for k in PLAIN if k in said), None))
            else said for said in seen["breaks"]) + ".", NO_BREAK)


def _verify_compile(inputs: dict, seen: dict) -> None:
    expect_no_error(seen["compile_error"], "compile_for_batches(fn, backend)")
    if not seen["asked"]:
        fail(f"compile_for_batches returned {seen['returned']!r} without calling torch.compile.",
             "return torch.compile(fn, backend=backend, dynamic=True, fullgraph=True).")
    asked = seen["asked"][-1]
    if asked["backend"] in ("NoneType", "str"):
        fail("compile_for_batches did not pass the backend it was given to torch.compile "
             f"({'the default, Inductor' if asked['backend'] == 'NoneType' else 'a name'}).",
             "pass it on: torch.compile(fn, backend=backend, ...).")
    expect_no_error(seen["call_error"], "the compiled function")
    counts, sizes = seen["compiled_per_call"], [len(b) for b in inputs["batches"]]
    if sum(counts) > 1:
        again = [size for size, n in zip(sizes, counts, strict=False) if n][1:]
        fail(f"The compiled function compiled {sum(counts)} times for batches of "
             f"{', '.join(map(str, sizes))}: again for {', '.join(map(str, again))}"
             + (" (dynamic=False: one graph per size)." if asked["dynamic"] is False else
                " (by default the second size recompiles with a dynamic batch dimension)."),
             "compile with dynamic=True: symbolic sizes from the first call.")
    if asked["fullgraph"] is not True:
        fail("compile_for_batches compiled once, but a graph break would silently split the "
             "graph.", "pass fullgraph=True: a graph break then raises an error.")
    if asked["mode"] is not None:
        fail(f"compile_for_batches passed mode={asked['mode']!r} as well as a backend: "
             "torch.compile refuses both.", "pass the backend only.")
