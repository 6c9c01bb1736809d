"""What the tests of lesson 09's exercises share."""
from __future__ import annotations

LESSON = "09_sharding"
