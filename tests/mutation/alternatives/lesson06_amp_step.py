"""Right alternatives: imported from tests/checks/lesson06/test_amp_step.py."""
from __future__ import annotations

from ...checks.lesson06.test_amp_step import (
    step_imported_names,
    step_loss_outside_in_float32,
    step_plain_path_without_scaling,
    step_with_course_utils,
    step_zeroing_at_the_end,
)

ALTERNATIVES = [step_loss_outside_in_float32, step_plain_path_without_scaling,
                step_with_course_utils, step_zeroing_at_the_end, step_imported_names]
