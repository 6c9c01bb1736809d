"""`course grade --shard I/N`: a deterministic partition of a class by student."""
from __future__ import annotations

import pytest

from course_utils.grading.shard import KUBERNETES_COUNT, Scheduled, Shard, from_scheduler, resolve


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


def _slurm(task: int, first: int, last: int, count: int) -> dict[str, str]:
    return {"SLURM_ARRAY_TASK_ID": str(task), "SLURM_ARRAY_TASK_MIN": str(first),
            "SLURM_ARRAY_TASK_MAX": str(last), "SLURM_ARRAY_TASK_COUNT": str(count)}


def test_auto_takes_the_shard_count_from_a_whole_slurm_array_and_a_rerun_from_the_record():
    """Checks --array=0-3 gives 2/4; a re-run of task 2 alone (--array=2) takes N from the
    recorded shards, and refuses without them (it cannot know N)."""
    assert from_scheduler(_slurm(2, 0, 3, 4), None) == Scheduled(Shard(2, 4), "slurm")
    assert from_scheduler(_slurm(2, 2, 2, 1), 4).shard == Shard(2, 4)
    with pytest.raises(ValueError, match="not 0-\\(N-1\\) and no earlier shard"):
        from_scheduler(_slurm(2, 2, 2, 1), None)


@pytest.mark.parametrize(("env", "recorded", "says"), [
    (_slurm(1, 0, 3, 4), 8, "this array has 4 tasks .* sharded 8 ways"),
    (_slurm(9, 9, 9, 1), 8, "array task 9 does not exist"),
    ({"JOB_COMPLETION_INDEX": "8", KUBERNETES_COUNT: "8"}, None, "completion index 8"),
    ({"JOB_COMPLETION_INDEX": "1"}, None, KUBERNETES_COUNT),
    ({}, None, "found no scheduler index"),
])
def test_a_shard_count_that_does_not_match_the_class_is_refused_in_one_line(env, recorded, says):
    """Checks an array smaller than the class's, a task past it, a Kubernetes index past its
    count, a missing count and no scheduler at all are each refused, naming the numbers."""
    with pytest.raises(ValueError, match=says) as refused:
        from_scheduler(env, recorded)
    assert "\n" not in str(refused.value)


def test_kubernetes_and_explicit_shards_agree_with_the_recorded_count():
    """Checks a Kubernetes index and count give the shard, and --shard 1/4 is refused for a
    class recorded with 8 shards."""
    assert from_scheduler({"JOB_COMPLETION_INDEX": "3", KUBERNETES_COUNT: "4"}, 4).shard \
        == Shard(3, 4)
    assert resolve("1/4", {}, None) == Scheduled(Shard(1, 4), "explicit")
    with pytest.raises(ValueError, match="sharded 8 ways"):
        resolve("1/4", {}, 8)
