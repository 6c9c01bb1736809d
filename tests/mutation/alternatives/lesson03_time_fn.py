"""Right alternatives: imported from tests/checks/lesson03/test_time_fn.py."""
from __future__ import annotations

from ...checks.lesson03.test_time_fn import (
    time_fn_syncing_everywhere,
    time_fn_with_a_timer,
    time_fn_with_accelerator_api,
    time_fn_with_an_overall_clock,
    time_fn_with_events,
    time_fn_with_imported_clock,
    time_fn_with_timeit_repeat,
    time_fn_with_vendor_apis,
)

ALTERNATIVES = [time_fn_with_accelerator_api, time_fn_with_vendor_apis, time_fn_syncing_everywhere,
                time_fn_with_imported_clock, time_fn_with_timeit_repeat, time_fn_with_a_timer,
                time_fn_with_events, time_fn_with_an_overall_clock]
