"""Tests of the check course_utils/checks/lesson05/largest_batch_size.py."""
from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest
import torch

from course_utils import checks, memory

from ...probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from ...solutions import solution

largest_batch_size = solution("05_memory", "largest_batch_size")


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
    assert ("When nothing fits (from 8), largest_batch_size() tried [8, 4, 2] before raising: "
            "it gave up before trying 1.") in message
    assert "halve after each failure down to 1, then raise" in message
    assert graded(checks.check_largest_batch_size, (largest_never_trying_one,), hidden=True,
                  seed=1).fraction < 1


def largest_whose_loop_never_runs(step, start):
    """Wrong: the search loop's condition is false from the start."""
    batch_size = start
    while batch_size < 1:
        step(batch_size)
        batch_size //= 2


def largest_spinning_without_a_step(step, start):
    """Wrong: the loop never calls step(), so nothing ever ends it."""
    batch_size = start
    while batch_size >= 1:
        batch_size = max(batch_size, 1)


@pytest.mark.parametrize(("answer", "seen"), [
    (largest_whose_loop_never_runs,
     "it never called step() and returned None (its code never went round a loop)"),
    (largest_spinning_without_a_step,
     "largest_batch_size() went round its loop 100000 times without calling step()")],
    ids=["never-runs", "spins"])
def test_what_the_loop_did_is_said(answer, seen):
    """The probe counts the turns of the answer's own loop: one that never ran or never ends."""
    assert seen in failure(checks.check_largest_batch_size, answer)


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
