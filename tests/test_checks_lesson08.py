"""Lesson 08 checks: right answers pass, each typical mistake gets its own hint."""
from __future__ import annotations

import torch

from course_utils import checks

from .probe_roundtrip import failure, graded, passes
from .solutions import solution

LESSON = "08_overhead"
train_without_syncs = solution(LESSON, "train_without_syncs")
score = solution(LESSON, "compile_ready", "score")
compile_for_batches = solution(LESSON, "compile_ready", "compile_for_batches")
check_syncs, check_compile = checks.check_train_without_syncs, checks.check_compile_ready
SEEDS = [0, 7]


# ------------------------------------------------------------------ train_without_syncs

def train_stacked(model, batches, loss_fn, optimizer):
    """Right: keep the detached losses, stack them once after the loop."""
    losses = []
    for features, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).mean().item()


def train_zeros_total(model, batches, loss_fn, optimizer):
    """Right: a zero tensor as the running total, divided on the device."""
    total = torch.zeros(())
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return (total / len(batches)).item()


def train_no_grad_total(model, batches, loss_fn, optimizer):
    """Right: the total added under torch.no_grad(), which builds no graph either."""
    total = torch.zeros(())
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            total += loss
    return total.item() / len(batches)


def train_without_detach(model, batches, loss_fn, optimizer):
    """The walkthrough's mistake: the total keeps every step's autograd graph."""
    total = 0.0
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        total += loss
    return total.item() / len(batches)


def train_list_of_losses(model, batches, loss_fn, optimizer):
    losses = []
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss)
    return torch.stack(losses).mean().item()


def train_logged(model, batches, loss_fn, optimizer):
    total = 0.0
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(batches)


READS = {"float(loss)": float, "bool(loss < best)": lambda loss: bool(loss < 99.0),
         "print(loss)": repr, "loss.cpu()": lambda loss: loss.cpu(),
         "loss.tolist()": lambda loss: loss.tolist()}


def with_line(line):
    """The solution's loop with one read of the loss added after optimizer.step()."""
    def train(model, batches, loss_fn, optimizer):
        total = None
        for features, labels in batches:
            optimizer.zero_grad()
            loss = loss_fn(model(features), labels)
            loss.backward()
            optimizer.step()
            total = loss.detach() if total is None else total + loss.detach()
            READS[line](loss)
        return total.item() / len(batches)
    return train


def train_returns_tensor(model, batches, loss_fn, optimizer):
    total = 0
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        total = total + loss.detach()
    return total / len(batches)


def train_no_zero_grad(model, batches, loss_fn, optimizer):
    total = 0
    for features, labels in batches:
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        total = total + loss.detach()
    return total.item() / len(batches)


def train_returns_sum(model, batches, loss_fn, optimizer):
    total = 0
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        total = total + loss.detach()
    return total.item()


def test_train_without_syncs_right_answers_keep_full_marks():
    passes(check_syncs, train_without_syncs, seeds=SEEDS)
    for answer in (train_stacked, train_zeros_total, train_no_grad_total):
        passes(check_syncs, answer, seeds=[1])


def test_a_total_without_detach_is_told_to_detach():
    """Walkthrough r4 M3: the exercise asks for loss.detach(); a total of the losses themselves
    (or a list of them, stacked) keeps each step's graph alive and must not pass."""
    for answer in (train_without_detach, train_list_of_losses):
        message = failure(check_syncs, answer)
        assert message.startswith("train_without_syncs added the loss itself to a running total")
        assert "add loss.detach() to the total, not loss." in message


def test_item_every_step_is_named_as_a_sync_every_step():
    message = failure(check_syncs, train_logged)
    assert message.startswith("train_without_syncs read a value from the device inside the loop "
                              "(4 reads for 4 batches, the first during batch 0)")
    assert "every step" in message and "call .item() once, after the loop" in message


def test_each_hidden_read_counts_as_a_sync():
    for line in READS:
        assert "inside the loop" in failure(check_syncs, with_line(line)), line


def test_a_tensor_returned_is_told_to_read_it_once():
    message = failure(check_syncs, train_returns_tensor)
    assert message.startswith("train_without_syncs returned 'Tensor', not a Python float")


def test_missing_zero_grad_is_found_from_the_weights():
    assert "call optimizer.zero_grad()" in failure(check_syncs, train_no_zero_grad)


def test_the_sum_instead_of_the_mean():
    assert "the sum of the losses" in failure(check_syncs, train_returns_sum)


def test_no_step_and_two_reads_after_the_loop():
    def no_step(model, batches, loss_fn, optimizer):
        total = sum(loss_fn(model(x), y).detach() for x, y in batches)
        return total.item() / len(batches)

    def two_reads(model, batches, loss_fn, optimizer):
        total = torch.zeros(())
        for x, y in batches:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.detach()
        return float(total) / float(torch.tensor(len(batches)))
    assert "optimizer.step() 0 times" in failure(check_syncs, no_step)
    assert "read 2 device values after the loop" in failure(check_syncs, two_reads)


def test_the_stub_is_not_implemented():
    def stub(model, batches, loss_fn, optimizer):
        raise NotImplementedError()
    assert "not implemented yet" in failure(check_syncs, stub)


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
    assert "score() on a batch of 4 differs from the original's values" in message
    assert "only when largest > 10" in message


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
