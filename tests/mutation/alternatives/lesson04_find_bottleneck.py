"""Right alternatives: imported from tests/checks/lesson04/test_find_bottleneck.py."""
from __future__ import annotations

import statistics
import timeit

from ...checks.lesson04.test_find_bottleneck import (
    answer,
    find_bottleneck_subtracting,
    find_bottleneck_with_next_and_accelerator,
    find_bottleneck_with_ns_and_vendor_syncs,
)

ALTERNATIVES = [find_bottleneck_with_next_and_accelerator, answer(summarise=statistics.median),
                answer(clock=timeit.default_timer), answer(summarise=lambda values:
                statistics.fmean(values[1:])), find_bottleneck_with_ns_and_vendor_syncs,
                find_bottleneck_subtracting]
