"""What the tests of lesson 07's exercises share."""
from __future__ import annotations

LESSON = "07_multi_gpu"
