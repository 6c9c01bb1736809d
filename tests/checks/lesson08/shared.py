"""What the tests of lesson 08's exercises share."""
from __future__ import annotations

from course_utils import checks

LESSON = "08_overhead"
check_syncs, check_compile = checks.check_train_without_syncs, checks.check_compile_ready
SEEDS = [0, 7]
