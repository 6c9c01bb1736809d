"""`course grade --shard I/N`: a deterministic partition of a class by student."""
from __future__ import annotations

import pytest

from course_utils.grading.shard import Shard


def test_every_student_is_in_exactly_one_shard_and_shards_are_balanced():
    """Checks 1,000 ids fall into exactly one of 4 shards each, about a quarter per shard,
    and the same way every time (nothing but the id decides)."""
    students = [f"student{index:04d}" for index in range(1000)]
    shards = [Shard(index, 4) for index in range(4)]
    owners = [[shard.index for shard in shards if shard.holds(s)] for s in students]
    assert all(len(owner) == 1 for owner in owners)
    sizes = [sum(owner == [index] for owner in owners) for index in range(4)]
    assert all(200 < size < 300 for size in sizes), sizes
    assert owners == [[shard.index for shard in shards if shard.holds(s)] for s in students]


@pytest.mark.parametrize("text", ["4/4", "-1/4", "1/0", "1", "a/b", "1/2/3"])
def test_a_bad_shard_names_the_value_and_the_form(text):
    """Checks a malformed or out-of-range --shard is refused with the value and the rule."""
    with pytest.raises(ValueError, match="--shard must"):
        Shard.parse(text)


def test_one_shard_is_the_whole_class():
    """Checks 0/1 holds everyone."""
    assert Shard.parse("0/1").holds("anyone") and str(Shard.parse(" 2/5 ")) == "2/5"
