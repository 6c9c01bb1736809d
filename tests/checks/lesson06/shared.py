"""What the tests of lesson 06's exercises share."""
from __future__ import annotations

from ...solutions import solution

amp_settings = solution("06_mixed_precision", "amp_settings")
