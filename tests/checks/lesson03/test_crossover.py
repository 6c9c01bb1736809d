"""Tests of the check course_utils/checks/lesson03/crossover.py."""
from __future__ import annotations

import numpy as np
import pytest

from course_utils import checks
from course_utils.checks.lesson03.crossover import expected_crossover

from ...probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from ...solutions import solution
from .shared import time_fn_not_done, time_fn_timing_all_calls_together

crossover = solution("03_timing", "crossover")


# ------------------------------------------------------------------ crossover

def crossover_from_the_end(sizes, cpu_times, acc_times):
    """Right: walk back from the largest size while the accelerator wins."""
    found = None
    for index in reversed(range(len(sizes))):
        if not acc_times[index] < cpu_times[index]:
            break
        found = sizes[index]
    return found


def crossover_with_all(sizes, cpu_times, acc_times):
    """Right: the first index from which every later pair is a win."""
    pairs = list(zip(cpu_times, acc_times, strict=True))
    for index, size in enumerate(sizes):
        if all(acc < cpu for cpu, acc in pairs[index:]):
            return size
    return None


def crossover_with_numpy(sizes, cpu_times, acc_times):
    """Right: NumPy does the comparison and the size comes back as a NumPy integer."""
    wins = np.asarray(acc_times) < np.asarray(cpu_times)
    losses = np.flatnonzero(~wins)
    first = losses[-1] + 1 if losses.size else 0
    return np.asarray(sizes)[first] if first < len(sizes) else None


def crossover_with_a_flag_list(sizes, cpu_times, acc_times):
    """Right: a list of wins, then the last loss found with a reversed index."""
    wins = [acc < cpu for cpu, acc in zip(cpu_times, acc_times, strict=True)]
    if not wins[-1]:
        return None
    last_loss = max((i for i, win in enumerate(wins) if not win), default=-1)
    return sizes[last_loss + 1]


def crossover_with_a_while_loop(sizes, cpu_times, acc_times):
    """Right: a while loop from the end, on tuples of numbers (any sequence works)."""
    sizes, cpu_times, acc_times = tuple(sizes), tuple(cpu_times), tuple(acc_times)
    index = len(sizes)
    while index > 0 and acc_times[index - 1] < cpu_times[index - 1]:
        index -= 1
    return sizes[index] if index < len(sizes) else None


@pytest.mark.parametrize("answer", [crossover, crossover_from_the_end, crossover_with_all,
                                    crossover_with_numpy, crossover_with_a_flag_list,
                                    crossover_with_a_while_loop], ids=lambda f: f.__name__)
def test_crossover_right_answers_keep_full_marks(answer, capsys):
    passes(checks.check_crossover, answer)
    printed = capsys.readouterr().out
    assert "a clean crossing → 128; an accelerator that is never faster → None; one noisy " \
           "point → 128; a tie just before the crossing → 256." in printed
    assert "a sweep that crosses back;" in printed or "a sweep that crosses back." in printed


def test_crossover_hidden_success_line_reveals_no_answer(capsys):
    checks.check_crossover(crossover, hidden=True, seed=1)
    assert "→" not in capsys.readouterr().out


def crossover_first_win(sizes, cpu_times, acc_times):
    return next((s for s, c, a in zip(sizes, cpu_times, acc_times, strict=True) if a < c),
                None)


def crossover_with_ties(sizes, cpu_times, acc_times):
    return crossover(sizes, [c * (1 + 1e-12) for c in cpu_times], acc_times)


def crossover_index(sizes, cpu_times, acc_times):
    found = crossover(sizes, cpu_times, acc_times)
    return None if found is None else sizes.index(found)


def crossover_raising_when_never(sizes, cpu_times, acc_times):
    wins = [index for index in range(len(sizes))
            if all(a < c for c, a in zip(cpu_times[index:], acc_times[index:], strict=True))]
    return sizes[min(wins)]


def crossover_the_wrong_way_round(sizes, cpu_times, acc_times):
    return crossover(sizes, acc_times, cpu_times)


def crossover_one_too_late(sizes, cpu_times, acc_times):
    found = crossover(sizes, cpu_times, acc_times)
    return None if found in (None, sizes[-1]) else sizes[sizes.index(found) + 1]


def crossover_never_none(sizes, cpu_times, acc_times):
    found = crossover(sizes, cpu_times, acc_times)
    return sizes[-1] if found is None else found


def crossover_always_none(sizes, cpu_times, acc_times):
    return None


def crossover_as_text(sizes, cpu_times, acc_times):
    return str(crossover(sizes, cpu_times, acc_times))


@pytest.mark.parametrize("answer, hint, share", [
    (crossover_first_win, ("crossover() returned 32, the first size where acc_times < "
                           "cpu_times, but the accelerator is slower again at 64 (acc_times >= "
                           "cpu_times there): a faster point followed by slower ones is noise"),
     3 / 4),
    (crossover_index, ("which is not one of the sizes: it looks like the position in the list; "
                       "return sizes[3]"), 1 / 4),
    (crossover_raising_when_never, ("when the accelerator never stays faster up to the largest "
                                    "size, return None"), 3 / 4),
    (crossover_the_wrong_way_round, "where the accelerator is slower than the CPU", 0),
    (crossover_one_too_late, "but the accelerator is already faster at 128, the size before it",
     1 / 4),
    (crossover_never_none, "crossover() returned 1024, where the accelerator is slower", 3 / 4),
    (crossover_always_none, ("crossover() returned None for all 4 sweeps, but acc_times < "
                             "cpu_times from 128 "
                             "up to the largest size: the answer is that size"), 1 / 4),
    (crossover_as_text, "crossover() returned str", 0),
], ids=lambda value: getattr(value, "__name__", ""))
def test_crossover_mistakes(answer, hint, share):
    message = failure(checks.check_crossover, answer)
    assert hint in message
    assert graded(checks.check_crossover, (answer,), hidden=False, seed=0).fraction == \
        pytest.approx(share)


def test_crossover_ties_fail_the_visible_check_too():
    """The visible check has a tie, so `<=` does not get a tick there and lose points later."""
    visible = failure(checks.check_crossover, crossover_with_ties)
    assert "✘ a tie just before the crossing: crossover() returned 128, where both took the " \
        "same time" in visible
    message = failure(checks.check_crossover, crossover_with_ties, hidden=True, seed=1)
    assert "where both took the same time: equal is not faster" in message
    assert graded(checks.check_crossover, (crossover_with_ties,), hidden=True,
                  seed=1).fraction == pytest.approx(5 / 6)


def test_crossover_crossing_back_is_noise_in_the_hidden_part():
    message = failure(checks.check_crossover, crossover_first_win, hidden=True, seed=1)
    assert "✘ a sweep that crosses back: crossover() returned" in message
    assert "but the accelerator is slower again at" in message
    hidden_none = failure(checks.check_crossover, crossover_always_none, hidden=True, seed=1)
    assert "acc_times < cpu_times from one of the sizes up to the largest" in hidden_none


def test_crossover_hidden_messages_do_not_reveal_the_answer():
    for seed in HIDDEN_SEEDS:
        inputs = checks.check_crossover.make_inputs(seed, True)
        message = failure(checks.check_crossover, crossover_always_none, hidden=True, seed=seed)
        for sweep in inputs["cases"]:
            answer = expected_crossover(sweep["sizes"], sweep["cpu"], sweep["acc"])
            if answer is not None:
                assert f" {answer}" not in message


@pytest.mark.parametrize("acc, expected", [
    ([2, 2, 2, 2], None),        # never faster
    ([0, 0, 0, 0], 1),           # faster from the start
    ([2, 0, 2, 0], 8),           # noisy: the run of wins that reaches the end starts at 8
    ([2, 0, 0, 2], None),        # crosses back
    ([2, 1, 0, 0], 4),           # a tie (1 == 1) is not faster
])
def test_expected_crossover_rule(acc, expected):
    assert expected_crossover([1, 2, 4, 8], [1, 1, 1, 1], acc) == expected


def test_crossover_hidden_sweeps_have_every_pattern_and_follow_the_seed():
    made = [checks.check_crossover.make_inputs(seed, True) for seed in HIDDEN_SEEDS]
    assert len({str(inputs) for inputs in made}) > 1
    for inputs in made:
        answers = {sweep["what"]: expected_crossover(sweep["sizes"], sweep["cpu"], sweep["acc"])
                   for sweep in inputs["cases"]}
        assert answers["an accelerator that is never faster"] is None
        assert answers["a sweep that crosses back"] is None
        assert answers["an accelerator faster from the start"] is not None
        noisy = next(s for s in inputs["cases"] if s["what"] == "one noisy point")
        assert crossover_first_win(noisy["sizes"], noisy["cpu"], noisy["acc"]) != \
            answers["one noisy point"]


@pytest.mark.parametrize("answer, check", [
    (time_fn_timing_all_calls_together, checks.check_time_fn),
    (crossover_first_win, checks.check_crossover),
])
def test_wrong_answers_lose_points_when_graded(answer, check):
    assert graded(check, (answer,), hidden=True, seed=1).fraction < 1


def crossover_not_done(sizes, cpu_times, acc_times):
    raise NotImplementedError()


@pytest.mark.parametrize("check, stub, name", [
    (checks.check_time_fn, time_fn_not_done, "time_fn()"),
    (checks.check_crossover, crossover_not_done, "crossover()"),
])
def test_an_unsolved_exercise_gets_one_not_implemented_message(check, stub, name):
    for hidden in (False, True):
        message = failure(check, stub, hidden=hidden, seed=1)
        assert message == (f"{name} is not implemented yet (it raises NotImplementedError).\n"
                           "How to fix it: replace `raise NotImplementedError()` with your code "
                           "and run the cell again.")
