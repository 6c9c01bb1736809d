"""Right alternatives: imported from tests/checks/lesson05/test_train_with_accumulation.py."""
from __future__ import annotations

from ...checks.lesson05.test_train_with_accumulation import (
    accumulate_dividing_the_gradients,
    accumulate_in_one_loop,
    accumulate_keeping_zeroed_tensors,
    accumulate_with_numpy_groups,
    accumulate_zeroing_at_group_start,
)

ALTERNATIVES = [accumulate_in_one_loop, accumulate_zeroing_at_group_start,
                accumulate_dividing_the_gradients, accumulate_keeping_zeroed_tensors,
                accumulate_with_numpy_groups]
