"""Tests of the check course_utils/checks/lesson05/train_with_accumulation.py."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from course_utils import checks

from ...probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from ...solutions import solution

train_with_accumulation = solution("05_memory", "train_with_accumulation")


# ------------------------------------------------------------------ train_with_accumulation

def accumulate_in_one_loop(model, loss_fn, optimizer, micro_batches, accumulation_steps):
    """Right: the source's loop, fixed for the last, smaller group."""
    n, steps = len(micro_batches), 0
    for i, (inputs, targets) in enumerate(micro_batches):
        group_size = min(accumulation_steps, n - i // accumulation_steps * accumulation_steps)
        (loss_fn(model(inputs), targets) / group_size).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            steps += 1
    return steps


def accumulate_zeroing_at_group_start(model, loss_fn, optimizer, micro_batches,
                                      accumulation_steps):
    """Right: zero_grad() at the start of each group (model.zero_grad, another API)."""
    steps = 0
    for start in range(0, len(micro_batches), accumulation_steps):
        model.zero_grad()
        group = micro_batches[start:start + accumulation_steps]
        for inputs, targets in group:
            loss = loss_fn(model(inputs), targets)
            (loss * (1 / len(group))).backward()
        optimizer.step()
        steps += 1
    return steps


def source_loop(model, loss_fn, optimizer, micro_batches, accumulation_steps):
    """The source material's loop: the last, smaller group never steps."""
    steps = 0
    for i, (inputs, targets) in enumerate(micro_batches):
        loss = loss_fn(model(inputs), targets) / accumulation_steps
        loss.backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
            steps += 1
    return steps


def last_group_divided_by_k(model, loss_fn, optimizer, micro_batches, accumulation_steps):
    steps = 0
    for i, (inputs, targets) in enumerate(micro_batches):
        (loss_fn(model(inputs), targets) / accumulation_steps).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == len(micro_batches):
            optimizer.step()
            optimizer.zero_grad()
            steps += 1
    return steps


def without_loss_scaling(model, loss_fn, optimizer, micro_batches, accumulation_steps):
    steps = 0
    for i, (inputs, targets) in enumerate(micro_batches):
        loss_fn(model(inputs), targets).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == len(micro_batches):
            optimizer.step()
            optimizer.zero_grad()
            steps += 1
    return steps


def zero_grad_inside_the_loop(model, loss_fn, optimizer, micro_batches, accumulation_steps):
    n, steps = len(micro_batches), 0
    for i, (inputs, targets) in enumerate(micro_batches):
        group_size = min(accumulation_steps, n - i // accumulation_steps * accumulation_steps)
        optimizer.zero_grad()
        (loss_fn(model(inputs), targets) / group_size).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            steps += 1
    return steps


def never_zeroing(model, loss_fn, optimizer, micro_batches, accumulation_steps):
    steps = 0
    for start in range(0, len(micro_batches), accumulation_steps):
        group = micro_batches[start:start + accumulation_steps]
        for inputs, targets in group:
            (loss_fn(model(inputs), targets) / len(group)).backward()
        optimizer.step()
        steps += 1
    return steps


def zeroing_before_step(model, loss_fn, optimizer, micro_batches, accumulation_steps):
    steps = 0
    for start in range(0, len(micro_batches), accumulation_steps):
        group = micro_batches[start:start + accumulation_steps]
        for inputs, targets in group:
            (loss_fn(model(inputs), targets) / len(group)).backward()
        optimizer.zero_grad()
        optimizer.step()
        steps += 1
    return steps


def summing_the_losses(model, loss_fn, optimizer, micro_batches, accumulation_steps):
    steps = 0
    for start in range(0, len(micro_batches), accumulation_steps):
        group = micro_batches[start:start + accumulation_steps]
        total = sum(loss_fn(model(inputs), targets) for inputs, targets in group)
        (total / len(group)).backward()
        optimizer.step()
        optimizer.zero_grad()
        steps += 1
    return steps


def stepping_every_micro_batch(model, loss_fn, optimizer, micro_batches, accumulation_steps):
    for inputs, targets in micro_batches:
        loss_fn(model(inputs), targets).backward()
        optimizer.step()
        optimizer.zero_grad()
    return len(micro_batches)


def returning_nothing(model, loss_fn, optimizer, micro_batches, accumulation_steps):
    train_with_accumulation(model, loss_fn, optimizer, micro_batches, accumulation_steps)


def accumulation_not_done(model, loss_fn, optimizer, micro_batches, accumulation_steps):
    raise NotImplementedError()


def accumulate_dividing_the_gradients(model, loss_fn, optimizer, micro_batches,
                                      accumulation_steps):
    """Right: unscaled losses, the summed gradients divided by the group's size before step()."""
    steps = 0
    for start in range(0, len(micro_batches), accumulation_steps):
        group = micro_batches[start:start + accumulation_steps]
        for inputs, targets in group:
            torch.autograd.backward(loss_fn(model(inputs), targets))
        for parameter in model.parameters():
            parameter.grad /= len(group)
        optimizer.step()
        for parameter in model.parameters():
            parameter.grad = None  # zeroed by hand, as zero_grad() does
        steps += 1
    return steps


def accumulate_keeping_zeroed_tensors(model, loss_fn, optimizer, micro_batches,
                                      accumulation_steps):
    """Right: zero_grad(set_to_none=False), a loss scaled with .div(), a step after the loop."""
    pending, steps = 0, 0
    for i, (inputs, targets) in enumerate(micro_batches):
        size = min(accumulation_steps, len(micro_batches) - i // accumulation_steps
                   * accumulation_steps)
        loss_fn(model(inputs), targets).div(size).backward()
        pending += 1
        if pending == accumulation_steps:
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)
            pending, steps = 0, steps + 1
    if pending:
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        steps += 1
    return steps


def accumulate_with_numpy_groups(model, loss_fn, optimizer, micro_batches,
                                 accumulation_steps):
    """Right: groups from np.array_split over the positions; a weighted loss per micro-batch."""
    groups = np.array_split(np.arange(len(micro_batches)),
                            range(accumulation_steps, len(micro_batches), accumulation_steps))
    for group in groups:
        weight = 1.0 / len(group)
        for position in group:
            inputs, targets = micro_batches[position]
            (weight * loss_fn(model(inputs), targets)).backward()
        optimizer.step()
        optimizer.zero_grad()
    return len(groups)


def extra_step_after_the_loop(model, loss_fn, optimizer, micro_batches, accumulation_steps):
    """Wrong: a step after the loop even when no smaller group is left."""
    n, steps = len(micro_batches), 0
    for i, (inputs, targets) in enumerate(micro_batches):
        group_size = min(accumulation_steps, n - i // accumulation_steps * accumulation_steps)
        (loss_fn(model(inputs), targets) / group_size).backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
            steps += 1
    optimizer.step()  # for the last, smaller group, if any
    optimizer.zero_grad()
    return steps + 1


def returning_the_full_groups(model, loss_fn, optimizer, micro_batches, accumulation_steps):
    """Wrong: the number of full groups, not of steps."""
    train_with_accumulation(model, loss_fn, optimizer, micro_batches, accumulation_steps)
    return len(micro_batches) // accumulation_steps


def test_an_extra_step_without_gradients_is_named():
    message = failure(checks.check_train_with_accumulation, extra_step_after_the_loop,
                      hidden=True, seed=1)
    assert "optimizer.step() ran once more after the last group, with no gradients" in message
    assert "step after the loop only when a smaller group is left" in message
    checks.check_train_with_accumulation(extra_step_after_the_loop)  # 5 in 2s: right there


def divided_by_k_and_zeroed_by_hand(model, loss_fn, optimizer, micro_batches,
                                    accumulation_steps):
    """Wrong in the last, smaller group (divided by k); gradients zeroed by hand, so no
    zero_grad() call is seen."""
    steps = 0
    for start in range(0, len(micro_batches), accumulation_steps):
        for inputs, targets in micro_batches[start:start + accumulation_steps]:
            (loss_fn(model(inputs), targets) / accumulation_steps).backward()
        optimizer.step()
        for parameter in model.parameters():
            parameter.grad = None
        steps += 1
    return steps


def test_gradients_zeroed_by_hand_are_not_taken_for_a_leak():
    """No zero_grad() call is seen, but the gradients say what went wrong."""
    message = failure(checks.check_train_with_accumulation, divided_by_k_and_zeroed_by_hand)
    assert "At optimizer step 3, the last group has 1 micro-batch(es), but their losses were " \
        "divided by accumulation_steps=2" in message
    assert "previous group's gradients" not in message


def test_returning_the_number_of_full_groups():
    message = failure(checks.check_train_with_accumulation, returning_the_full_groups)
    assert "returned 2 after 3 optimizer steps" in message


@pytest.mark.parametrize("answer", [train_with_accumulation, accumulate_in_one_loop,
                                    accumulate_zeroing_at_group_start,
                                    accumulate_dividing_the_gradients,
                                    accumulate_keeping_zeroed_tensors,
                                    accumulate_with_numpy_groups],
                         ids=lambda f: f.__name__)
def test_accumulation_right_answers_keep_full_marks(answer, capsys):
    passes(checks.check_train_with_accumulation, answer)
    assert "✔ train_with_accumulation() steps once per group with the gradient of the group's " \
           "mean loss (float64), the final smaller group included, calls backward() once per " \
           "micro-batch and returns the number of steps: 5 micro-batches in groups of 2." \
           in capsys.readouterr().out


def test_the_source_loop_drops_the_last_group():
    message = failure(checks.check_train_with_accumulation, source_loop)
    assert "the last 1 micro-batch(es) never reached optimizer.step()" in message
    assert "`if (i + 1) % accumulation_steps == 0` alone drops them" in message
    assert "✔ passed: 5 micro-batches, accumulation_steps=2: a step per full group" in message
    assert graded(checks.check_train_with_accumulation, (source_loop,), hidden=True,
                  seed=1).fraction == pytest.approx(4 / 5)


def test_the_last_group_divided_by_accumulation_steps():
    message = failure(checks.check_train_with_accumulation, last_group_divided_by_k)
    assert "At optimizer step 3, the last group has 1 micro-batch(es), but their losses were " \
           "divided by accumulation_steps=2" in message
    assert "divide by the size of the group" in message


def test_accumulation_without_loss_scaling():
    message = failure(checks.check_train_with_accumulation, without_loss_scaling)
    assert "At optimizer step 1, the gradients are the sum of the 2 micro-batches' gradients, " \
           "not their mean" in message
    assert "divide each micro-batch's loss by the number of micro-batches" in message


def test_zero_grad_inside_the_accumulation_loop():
    message = failure(checks.check_train_with_accumulation, zero_grad_inside_the_loop)
    assert "zero_grad() ran inside the accumulation loop" in message
    assert "threw away the gradients of the group's earlier micro-batches" in message


def test_never_zeroing_leaks_gradients_into_the_next_group():
    message = failure(checks.check_train_with_accumulation, never_zeroing)
    assert "At optimizer step 2, the previous group's gradients were still in .grad" in message
    assert "call optimizer.zero_grad() after each optimizer.step()" in message


def test_zeroing_between_backward_and_step():
    message = failure(checks.check_train_with_accumulation, zeroing_before_step)
    assert "the parameters had no gradients: zero_grad() ran between the last backward() " \
           "and step()" in message


def test_summing_the_losses_keeps_every_graph():
    message = failure(checks.check_train_with_accumulation, summing_the_losses)
    assert "backward() ran 1 time(s) for 2 micro-batches" in message
    assert "as much memory as the full batch" in message


def test_stepping_after_every_micro_batch():
    message = failure(checks.check_train_with_accumulation, stepping_every_micro_batch)
    assert "optimizer.step() ran 5 times, after every micro-batch" in message
    assert "step once per group of 2 micro-batches" in message


def test_returning_nothing():
    message = failure(checks.check_train_with_accumulation, returning_nothing)
    assert "returned None after 3 optimizer steps" in message
    assert "return the number of optimizer steps" in message


def test_accumulation_not_implemented():
    message = failure(checks.check_train_with_accumulation, accumulation_not_done)
    assert "train_with_accumulation() is not implemented yet" in message


def test_accumulation_hidden_cases_have_a_partial_group_and_a_full_one():
    for seed in HIDDEN_SEEDS:
        scenarios = checks.check_train_with_accumulation.make_inputs(seed, True)["scenarios"]
        remainders = [len(s["batches"]) % s["k"] for s in scenarios]
        assert remainders[0] > 0 and remainders[1] == 0


def test_accumulation_hidden_messages_do_not_reveal_the_reference_gradient():
    for seed in HIDDEN_SEEDS:
        message = failure(checks.check_train_with_accumulation, without_loss_scaling,
                          hidden=True, seed=seed)
        assert "expected" not in message and "e-" not in message
