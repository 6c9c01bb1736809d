"""Right alternatives: imported from tests/checks/lesson05/test_largest_batch_size.py."""
from __future__ import annotations

from ...checks.lesson05.test_largest_batch_size import (
    largest_checking_the_message,
    largest_with_a_flag,
    largest_with_continue,
    largest_with_course_helper,
    largest_with_numpy_sizes,
    largest_with_suppress,
    largest_with_the_cuda_name,
)

ALTERNATIVES = [largest_with_course_helper, largest_with_a_flag, largest_with_continue,
                largest_with_suppress, largest_with_numpy_sizes, largest_checking_the_message,
                largest_with_the_cuda_name]
