"""Right alternatives: copied from tests/test_checks_lesson05.py, and own."""
from __future__ import annotations

import contextlib

import numpy as np
import torch

from course_utils import memory


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


ALTERNATIVES = [largest_with_course_helper, largest_with_a_flag, largest_with_continue,
                largest_with_suppress, largest_with_numpy_sizes, largest_checking_the_message,
                largest_with_the_cuda_name]
