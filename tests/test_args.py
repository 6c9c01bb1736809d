"""The argument checks every lab helper uses: good values pass through, bad ones are named."""
import pytest

from course_utils.lab import args


@pytest.mark.parametrize("value", [1, 7, 10**12])
def test_positive_int_returns_a_good_value(value):
    assert args.positive_int(value, "n", "f") == value


@pytest.mark.parametrize("value", [0, -3, 1.0, True, "4", None])
def test_positive_int_names_the_function_argument_and_value(value):
    with pytest.raises(ValueError) as raised:
        args.positive_int(value, "n", "f")
    assert str(raised.value) == f"f: n must be a positive whole number, got {value!r}."


def test_positive_int_may_allow_none_and_says_what_it_means():
    assert args.positive_int(None, "threads", "f", none_means="all threads") is None
    with pytest.raises(ValueError, match=r"threads must be a positive whole number or None "
                                         r"\(all threads\), got 0\."):
        args.positive_int(0, "threads", "f", none_means="all threads")


def test_whole_number_has_a_minimum():
    assert args.whole_number(0, "warmup", "f") == 0
    assert args.whole_number(3, "k", "f", minimum=3) == 3
    with pytest.raises(ValueError, match="f: k must be a whole number of at least 3, got 2."):
        args.whole_number(2, "k", "f", minimum=3)
    with pytest.raises(ValueError, match="got False"):
        args.whole_number(False, "k", "f")


@pytest.mark.parametrize("check, wording", [(args.positive_number, "a positive number"),
                                            (args.seconds, "a positive number of seconds")])
def test_positive_numbers_return_floats_and_refuse_the_rest(check, wording):
    assert check(2, "x", "f") == 2.0 and isinstance(check(2, "x", "f"), float)
    for bad in (0, -0.5, float("nan"), True, "1"):
        with pytest.raises(ValueError) as raised:
            check(bad, "x", "f")
        assert str(raised.value) == f"f: x must be {wording}, got {bad!r}."


def test_predicates_refuse_bools():
    assert args.is_whole(3) and not args.is_whole(True) and not args.is_whole(3.0)
    assert args.is_real(3.5) and args.is_real(3) and not args.is_real(False)
    assert not args.is_real("3")
