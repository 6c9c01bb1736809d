"""Tests of the check course_utils/checks/lesson01/on_gpu.py."""
from __future__ import annotations

import pytest

from course_utils import checks

from ...probe_roundtrip import failure, graded, passes
from .shared import ON_GPU, with_answers


def test_on_gpu_correct(capsys):
    passes(checks.check_on_gpu, ON_GPU)
    assert "✔ Your predictions" in capsys.readouterr().out


def test_on_gpu_any_mapping_answers_as_a_dict():
    from collections import OrderedDict

    passes(checks.check_on_gpu, OrderedDict(ON_GPU))


@pytest.mark.parametrize("answer, expected", [
    (list(ON_GPU.values()), "on_gpu is a list, not a dict"),
    ({key: value for key, value in ON_GPU.items() if key != "h"}, "missing ['h']"),
    (with_answers(A=True), "unexpected ['A']"),
    (with_answers(c="False"), "on_gpu['c'] is a str, not True or False"),
    (with_answers(d=None), "Line d is not answered yet (None)"),
    (with_answers(a=True), "This is the classic bug"),
    (with_answers(b=False), "moves the module's parameters in place"),
    (with_answers(c=True), "the GPU copy is called `y`"),
    (with_answers(d=False), "creates the tensor directly on the GPU"),
])
def test_on_gpu_mistakes(answer, expected):
    assert expected in failure(checks.check_on_gpu, answer)


@pytest.mark.parametrize("line", "efgh")
def test_on_gpu_hidden_lines_fail_only_the_hidden_part_without_the_answer(line):
    answer = with_answers(**{line: not ON_GPU[line]})
    checks.check_on_gpu(answer)
    message = failure(checks.check_on_gpu, answer, hidden=True, seed=0)
    assert f"Your prediction for line {line} is not right." in message
    assert "True" not in message and "False" not in message


def test_on_gpu_earns_a_share_per_line_and_lists_each_wrong_line():
    answer = with_answers(a=True, b=False, g=True)
    message = failure(checks.check_on_gpu, answer)
    assert message.startswith("✘ line a: Your prediction for line a is not right")
    assert "✘ line b:" in message and "✔ passed: line c; line d" in message
    assert graded(checks.check_on_gpu, (answer,), hidden=False, seed=0).fraction == 0.5
    assert graded(checks.check_on_gpu, (answer,), hidden=True, seed=0).fraction == 5 / 8


def test_on_gpu_stub_is_answered_with_a_message_not_a_name_error():
    stub = {line: None for line in "abcdefgh"}
    message = failure(checks.check_on_gpu, stub)
    assert message.startswith("on_gpu is not answered yet: lines a, b, c, d are None.")


def test_no_hidden_answer_ships_in_the_installed_package():
    from pathlib import Path

    import course_utils
    package = Path(course_utils.__file__).parent
    text = "\n".join(path.read_text() for path in package.rglob("*.py"))
    for line in "efgh":
        assert f'"{line}": True' not in text and f'"{line}": False' not in text
