"""Right alternatives: imported from tests/checks/lesson07/test_accumulation_step.py."""
from __future__ import annotations

from ...checks.lesson07.test_accumulation_step import (
    accumulation_exit_stack,
    accumulation_grads_divided,
    accumulation_sliced,
    accumulation_weighted_by_samples,
    accumulation_zero_grad_last,
)

ALTERNATIVES = [accumulation_exit_stack, accumulation_zero_grad_last, accumulation_grads_divided,
                accumulation_sliced, accumulation_weighted_by_samples]
