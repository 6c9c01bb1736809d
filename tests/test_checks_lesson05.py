"""Lesson 05 checks: right answers pass, each typical mistake gets its own hint."""
from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest
import torch

from course_utils import checks, memory

from .probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from .solutions import solution

largest_batch_size = solution("05_memory", "largest_batch_size")
train_with_accumulation = solution("05_memory", "train_with_accumulation")


# ------------------------------------------------------------------ largest_batch_size

def largest_with_course_helper(step, start):
    return memory.find_batch_size(step, start).batch_size


def largest_with_a_flag(step, start):
    """Right: the except block only records the failure."""
    batch_size = start
    while batch_size >= 1:
        out_of_memory = False
        try:
            step(batch_size)
        except torch.OutOfMemoryError:
            out_of_memory = True
        if not out_of_memory:
            return batch_size
        batch_size //= 2
    raise RuntimeError("even a batch of 1 does not fit")


def largest_with_continue(step, start):
    """Right: `continue` leaves the except block before the retry."""
    batch_size = start
    while True:
        try:
            step(batch_size)
        except torch.OutOfMemoryError:
            if batch_size == 1:
                raise
            batch_size //= 2
            continue
        return batch_size


def largest_with_suppress(step, start):
    """Right: contextlib.suppress leaves the exception behind before the retry."""
    batch_size = start
    while batch_size >= 1:
        with contextlib.suppress(torch.OutOfMemoryError):
            step(batch_size)
            return batch_size
        batch_size //= 2
    raise RuntimeError("even a batch of 1 does not fit")


def largest_retrying_inside_except(step, start):
    try:
        step(start)
        return start
    except torch.OutOfMemoryError:
        if start == 1:
            raise
        return largest_retrying_inside_except(step, start // 2)


def largest_keeping_the_error(step, start):
    batch_size, errors = start, []
    while True:
        try:
            step(batch_size)
            return batch_size
        except torch.OutOfMemoryError as error:
            errors.append(error)  # for a report at the end
            if batch_size == 1:
                raise
        batch_size //= 2


def largest_catching_runtime_error(step, start):
    batch_size = start
    while True:
        try:
            step(batch_size)
            return batch_size
        except RuntimeError:
            if batch_size == 1:
                raise
        batch_size //= 2


def largest_returning_zero(step, start):
    batch_size = start
    while batch_size >= 1:
        try:
            step(batch_size)
            return batch_size
        except torch.OutOfMemoryError:
            pass
        batch_size //= 2
    return 0


def largest_halving_with_slash(step, start):
    batch_size = start
    while batch_size >= 1:
        try:
            step(batch_size)
            return batch_size
        except torch.OutOfMemoryError:
            pass
        batch_size /= 2
    raise RuntimeError("nothing fits")


def largest_never_stopping(step, start):
    batch_size = start
    while True:
        try:
            step(batch_size)
            return batch_size
        except torch.OutOfMemoryError:
            pass
        batch_size = max(1, batch_size // 2)


def largest_halving_first(step, start):
    return largest_batch_size(step, start // 2)


def largest_returning_the_failed_size(step, start):
    batch_size = start
    while True:
        try:
            step(batch_size)
            return batch_size * 2 if batch_size < start else batch_size
        except torch.OutOfMemoryError:
            if batch_size == 1:
                raise
        batch_size //= 2


def largest_not_catching(step, start):
    step(start)
    return start


def largest_not_done(step, start):
    raise NotImplementedError()


def largest_with_numpy_sizes(step, start):
    """Right: the sizes are NumPy integers (e.g. from np.right_shift); step() accepts them."""
    batch_size = np.int64(start)
    while True:
        try:
            step(batch_size)
            return batch_size
        except torch.OutOfMemoryError:
            if batch_size == 1:
                raise
        batch_size = np.right_shift(batch_size, 1)


def largest_checking_the_message(step, start):
    """Right, the older idiom: catch RuntimeError, re-raise unless it says out of memory."""
    batch_size = start
    while batch_size >= 1:
        try:
            step(batch_size)
            return batch_size
        except RuntimeError as error:
            if "out of memory" not in str(error) or batch_size == 1:
                raise
        torch.cuda.empty_cache()  # what many learners add; a no-op without CUDA
        batch_size = batch_size // 2
    raise AssertionError("not reached")


def largest_with_the_cuda_name(step, start):
    """Right: torch.cuda.OutOfMemoryError is the same class; a for loop over the halvings."""
    sizes = [start >> shift for shift in range(start.bit_length())]
    for batch_size in sizes:
        try:
            step(batch_size)
        except torch.cuda.OutOfMemoryError:
            if batch_size == sizes[-1]:
                raise
            continue
        return batch_size
    return None


def largest_never_trying_one(step, start):
    """Wrong: `while batch_size > 1` gives up before trying a batch of 1."""
    batch_size = start
    while batch_size > 1:
        try:
            step(batch_size)
            return batch_size
        except torch.OutOfMemoryError:
            pass
        batch_size //= 2
    raise RuntimeError("nothing fits")


def test_giving_up_before_a_batch_of_one():
    message = failure(checks.check_largest_batch_size, largest_never_trying_one)
    assert "When nothing fits (from 8), largest_batch_size() tried [8, 4, 2] before raising" \
        in message
    assert "halve after each failure down to 1, then raise" in message
    assert graded(checks.check_largest_batch_size, (largest_never_trying_one,), hidden=True,
                  seed=1).fraction < 1


@pytest.mark.parametrize("answer", [largest_batch_size, largest_with_course_helper,
                                    largest_with_a_flag, largest_with_continue,
                                    largest_with_suppress, largest_with_numpy_sizes,
                                    largest_checking_the_message, largest_with_the_cuda_name],
                         ids=lambda f: f.__name__)
def test_largest_batch_size_right_answers_keep_full_marks(answer, capsys):
    passes(checks.check_largest_batch_size, answer)
    printed = capsys.readouterr().out
    assert "✔ largest_batch_size() halves to the largest size that fits (start 512, fits up to " \
           "100)" in printed


def test_retrying_inside_the_except_block_is_named():
    message = failure(checks.check_largest_batch_size, largest_retrying_inside_except)
    assert "called step() again inside the `except` block" in message
    assert "traceback still holds the failed step's frames" in message
    assert "halve and retry after it" in message
    verdict = graded(checks.check_largest_batch_size, (largest_retrying_inside_except,),
                     hidden=True, seed=1)
    assert verdict.fraction == pytest.approx(4 / 6)  # the other cases pass


def test_keeping_the_exception_is_named():
    message = failure(checks.check_largest_batch_size, largest_keeping_the_error)
    assert "the failed step's tensors were still alive" in message
    assert "`last_error = e`, a list of errors" in message
    assert "inside the `except` block" not in message


def test_catching_runtime_error_swallows_bugs():
    message = failure(checks.check_largest_batch_size, largest_catching_runtime_error)
    assert "step(128) raised a RuntimeError that is not out-of-memory (a bug)" in message
    assert "it tried [256, 128, 64]" in message
    assert "catch torch.OutOfMemoryError only" in message
    verdict = graded(checks.check_largest_batch_size, (largest_catching_runtime_error,),
                     hidden=True, seed=7)
    assert verdict.fraction == pytest.approx(5 / 6)


def test_returning_zero_when_nothing_fits():
    message = failure(checks.check_largest_batch_size, largest_returning_zero)
    assert "When nothing fits (from 8), largest_batch_size() returned 0." in message
    assert "raise an error" in message


def test_halving_with_a_slash_gives_floats():
    message = failure(checks.check_largest_batch_size, largest_halving_with_slash)
    assert "raised ValueError: batch_size should be a positive integer, got 256.0" in message
    assert "halve with `batch_size // 2`" in message


def largest_subtracting_one(step, start):
    """Wrong: one less after each failure instead of half."""
    batch_size = start
    while True:
        try:
            step(batch_size)
            return batch_size
        except torch.OutOfMemoryError:
            if batch_size == 1:
                raise
        batch_size -= 1


@pytest.mark.parametrize("answer, tried", [
    (largest_never_stopping, "it tried 8, 4, 2, 1, 1, ..., 1."),
    (largest_subtracting_one, "it tried 512, 511, 510, 509, 508, ..., 483."),
])
def test_a_loop_that_never_stops_is_named(answer, tried):
    message = failure(checks.check_largest_batch_size, answer)
    assert "called step() 30 times without stopping: " + tried in message
    assert "stop after trying 1" in message


def test_skipping_start_is_named():
    message = failure(checks.check_largest_batch_size, largest_halving_first)
    assert "Starting at 512, largest_batch_size() tried [256, 128, 64]" in message
    assert "try `start` first" in message


def test_returning_another_size_than_the_one_that_ran():
    message = failure(checks.check_largest_batch_size, largest_returning_the_failed_size)
    assert "returned 128 after step(64) ran" in message


def test_not_catching_the_error_is_named():
    message = failure(checks.check_largest_batch_size, largest_not_catching)
    assert "raised OutOfMemoryError" in message
    assert "catch torch.OutOfMemoryError around the step, then try half" in message


def test_largest_batch_size_not_implemented():
    message = failure(checks.check_largest_batch_size, largest_not_done)
    assert "largest_batch_size() is not implemented yet" in message
    assert graded(checks.check_largest_batch_size, (largest_not_done,), hidden=True,
                  seed=0).fraction == 0


def test_largest_batch_size_hidden_inputs_follow_the_seed():
    made = [checks.check_largest_batch_size.make_inputs(seed, True) for seed in HIDDEN_SEEDS]
    assert len({json.dumps(inputs) for inputs in made}) == len(made)


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
