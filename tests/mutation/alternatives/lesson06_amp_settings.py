"""Right alternatives: imported from tests/checks/lesson06/test_amp_settings.py."""
from __future__ import annotations

from ...checks.lesson06.test_amp_settings import (
    settings_asks_macos,
    settings_by_capability,
    settings_by_properties,
    settings_in_the_device_context,
    settings_with_course_utils,
)

ALTERNATIVES = [settings_by_capability, settings_with_course_utils, settings_asks_macos,
                settings_in_the_device_context, settings_by_properties]
