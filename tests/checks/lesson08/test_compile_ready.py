"""Tests of the check course_utils/checks/lesson08/compile_ready.py."""
from __future__ import annotations

import torch

from ...probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from ...solutions import solution
from .shared import LESSON, SEEDS, check_compile

score = solution(LESSON, "compile_ready", "score")
compile_for_batches = solution(LESSON, "compile_ready", "compile_for_batches")


# ------------------------------------------------------------------ compile_ready

def score_clamped(x, weight):
    """Right: a clamp instead of torch.where."""
    scores = x @ weight
    return (scores * (10 / scores.abs().amax().clamp(min=10))).softmax(dim=-1)


def compile_as_decorator(fn, backend):
    """Right: torch.compile(...) as a decorator factory."""
    return torch.compile(backend=backend, dynamic=True, fullgraph=True)(fn)


def score_with_print(x, weight):
    scores = x @ weight
    print(f"scoring a batch of {x.shape[0]}")  # after an operation: the graph breaks here
    largest = scores.abs().amax()
    return torch.where(largest > 10, scores * (10 / largest), scores).softmax(dim=-1)


def score_with_item(x, weight):
    scores = x @ weight
    largest = scores.abs().max().item()
    return (scores * (10 / max(largest, 10.0))).softmax(dim=-1)


def score_with_if(x, weight):
    scores = x @ weight
    largest = scores.abs().max()
    if largest > 10:
        scores = scores * (10 / largest)
    return scores.softmax(dim=-1)


def score_always_scaled(x, weight):
    scores = x @ weight
    return (scores * (10 / scores.abs().amax())).softmax(dim=-1)


def both_shares(*answers):
    return graded(check_compile, answers, hidden=True, seed=1).fraction


def test_compile_ready_right_answers_keep_full_marks():
    passes(check_compile, score, compile_for_batches, seeds=SEEDS)
    passes(check_compile, score_clamped, compile_as_decorator, seeds=[1])


def test_each_graph_break_is_named_with_dynamos_reason():
    for wrong, reason in ((score_with_print, "builtin"), (score_with_item, "item()"),
                          (score_with_if, "generic_jump")):
        message = failure(check_compile, wrong, compile_for_batches)
        assert "score() has 1 graph break(s); Dynamo says:" in message, message
        assert reason in message and "torch.where" in message
    message = failure(check_compile, score_with_if, compile_for_batches)
    assert "generic_jump" in message and "(a Python `if` on a tensor's value)" in message
    assert both_shares(score_with_if, compile_for_batches) == 0.5  # the compile case passed


def test_values_that_differ_are_told_the_rule():
    message = failure(check_compile, score_always_scaled, compile_for_batches)
    assert ("score() on a batch of 4 whose largest |score| is 9.50 scaled the scores by "
            "10 / 9.5: the original scales by 10 / the largest |score| only when it exceeds "
            "10.") in message
    assert "only when largest > 10" in message


def test_values_name_the_quantity_compared_with_the_threshold():
    """The scale every batch's values show tells which reduction stood for the largest
    |score|, also one no test lists."""
    def score_with(reduce):
        def score_reduced(x, weight):
            scores = x @ weight
            largest = reduce(scores)
            return torch.where(largest > 10, scores * (10 / largest), scores).softmax(dim=-1)
        return score_reduced

    message = failure(check_compile, score_with(lambda s: s.abs().amin()), compile_for_batches)
    assert ("whose largest |score| is 10.50, over the threshold 10, left these scores unscaled: "
            "on every batch its values are those of comparing the smallest |score| (amin, a min "
            "where the max belongs)") in message


def test_values_name_the_dimension_their_softmax_ran_over():
    def score_over_the_batch(x, weight):
        scores = x @ weight
        largest = scores.abs().amax()
        return torch.where(largest > 10, scores * (10 / largest), scores).softmax(dim=0)

    message = failure(check_compile, score_over_the_batch, compile_for_batches)
    assert "returned columns that each sum to 1: its softmax ran over dim 0" in message


def test_every_draw_probes_the_threshold_from_both_sides():
    """A threshold of 9 or 11 instead of 10 fails on every seed: each draw has a batch whose
    largest |score| lies just under 10 and one just over it."""

    for hidden, seed in ((False, 0), *((True, seed) for seed in HIDDEN_SEEDS)):
        inputs = check_compile.make_inputs(seed, hidden)
        weight = torch.tensor(inputs["weight"], dtype=torch.float64)
        largest = [(torch.tensor(x, dtype=torch.float64) @ weight).abs().max().item()
                   for x in inputs["batches"]]
        assert any(9 < value < 10 for value in largest) and any(
            10 < value < 11 for value in largest), largest


def test_hidden_batch_sizes_never_equal_the_weights_sizes():
    """Dynamo gives equal sizes one symbol (duck sizing): a batch of 6 rows of 6 features would
    recompile a right answer at the next size."""
    for seed in range(200):
        inputs = check_compile.make_inputs(seed, True)
        assert not {len(batch) for batch in inputs["batches"]} & {5, 6}, seed


def test_default_dynamic_recompiles_on_the_second_size():
    def default(fn, backend):
        return torch.compile(fn, backend=backend, fullgraph=True)
    message = failure(check_compile, score, default)
    assert ("The compiled function compiled 2 times for batches of 4, 8, 12, "
            "16: again for 8 (by default") in message
    assert "dynamic=True" in message and both_shares(score, default) == 0.5


def test_dynamic_false_compiles_per_size():
    def static(fn, backend):
        return torch.compile(fn, backend=backend, dynamic=False, fullgraph=True)
    message = failure(check_compile, score, static)
    assert "compiled 4 times" in message and "(dynamic=False: one graph per size)" in message


def test_backend_ignored_or_not_compiled_or_no_fullgraph():
    def inductor(fn, backend):
        return torch.compile(fn, dynamic=True, fullgraph=True)

    def uncompiled(fn, backend):
        return fn

    def no_fullgraph(fn, backend):
        return torch.compile(fn, backend=backend, dynamic=True)
    assert "did not pass the backend" in failure(check_compile, score, inductor)
    assert "without calling torch.compile" in failure(check_compile, score, uncompiled)
    assert "pass fullgraph=True" in failure(check_compile, score, no_fullgraph)


def test_compile_stubs_are_not_implemented():
    def stub(*args):
        raise NotImplementedError()
    message = failure(check_compile, stub, stub)
    assert "not implemented yet" in message
    assert both_shares(stub, stub) == 0
