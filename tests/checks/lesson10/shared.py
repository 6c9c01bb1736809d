"""What the tests of lesson 10's exercises share."""
from __future__ import annotations

from course_utils import checks

LESSON = "10_speedrun"
check_speedup, check_verdict = checks.check_speedup_with_interval, checks.check_verdict
check_until = checks.check_train_until
SEEDS = [0, 7]
