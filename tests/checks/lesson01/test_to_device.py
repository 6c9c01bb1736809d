"""Tests of the check course_utils/checks/lesson01/to_device.py."""
from __future__ import annotations

import collections
import collections.abc

import numpy as np
import pytest
import torch

from course_utils import checks, get_device

from ...probe_roundtrip import HIDDEN_SEEDS, failure, passes
from .shared import to_device, to_device_in_place, to_device_moves_everything, to_device_no_dicts

# ------------------------------------------------------------------ to_device

def to_device_type_preserving(obj, device):
    """Another right answer: rebuild every container with its own type."""
    if torch.is_tensor(obj):
        return obj.to(device=device)
    if isinstance(obj, collections.abc.Mapping):
        return type(obj)((key, to_device_type_preserving(v, device)) for key, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device_type_preserving(item, device) for item in obj)
    return obj


def to_device_no_tuples(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {key: to_device_no_tuples(value, device) for key, value in obj.items()}
    if isinstance(obj, list):
        return [to_device_no_tuples(item, device) for item in obj]
    return obj


def to_device_no_lists(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {key: to_device_no_lists(value, device) for key, value in obj.items()}
    if isinstance(obj, tuple):
        return tuple(to_device_no_lists(item, device) for item in obj)
    return obj


def to_device_tuple_as_list(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {key: to_device_tuple_as_list(value, device) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_device_tuple_as_list(item, device) for item in obj]
    return obj


def to_device_forgets_return(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        {key: to_device_forgets_return(value, device) for key, value in obj.items()}
        return None
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device_forgets_return(item, device) for item in obj)
    return obj


def to_device_with_dtype(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device, torch.float32)
    return to_device(obj, device) if not isinstance(obj, (dict, list, tuple)) else (
        {key: to_device_with_dtype(value, device) for key, value in obj.items()}
        if isinstance(obj, dict) else type(obj)(to_device_with_dtype(i, device) for i in obj))


def to_device_as_tensor(obj, device):
    if isinstance(obj, dict):
        return {key: to_device_as_tensor(value, device) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device_as_tensor(item, device) for item in obj)
    if obj is None or isinstance(obj, str):
        return obj
    return torch.as_tensor(obj).to(device)


def to_device_any_sequence(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {key: to_device_any_sequence(value, device) for key, value in obj.items()}
    if isinstance(obj, collections.abc.Sequence):  # "abc" is a sequence of "a", "b", "c"...
        return type(obj)([to_device_any_sequence(item, device) for item in obj])
    return obj


def to_device_any_sequence_lazily(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {key: to_device_any_sequence_lazily(value, device) for key, value in obj.items()}
    if isinstance(obj, collections.abc.Sequence):  # str(generator) is "<generator ...>"
        return type(obj)(to_device_any_sequence_lazily(item, device) for item in obj)
    return obj


def to_device_ignores_argument(obj, device):
    return to_device(obj, get_device())


def to_device_unassigned(obj, device):
    if isinstance(obj, torch.Tensor):
        obj.to(device)
        return obj
    if isinstance(obj, dict):
        return {key: to_device_unassigned(value, device) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device_unassigned(item, device) for item in obj)
    return obj


def to_device_star_args(obj, device):
    """A namedtuple-style rebuild applied to every tuple."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {key: to_device_star_args(value, device) for key, value in obj.items()}
    if isinstance(obj, list):
        return [to_device_star_args(item, device) for item in obj]
    if isinstance(obj, tuple):
        return type(obj)(*[to_device_star_args(item, device) for item in obj])
    return obj


def to_device_drops_empty(obj, device):
    """Right on the visible structures; empty containers come back as None."""
    if isinstance(obj, (dict, list, tuple)) and len(obj) == 0:
        return None
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {key: to_device_drops_empty(value, device) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device_drops_empty(item, device) for item in obj)
    return obj


def to_device_not_done(obj, device):
    raise NotImplementedError()


@pytest.mark.parametrize("answer", [to_device, to_device_type_preserving])
def test_to_device_correct(answer, capsys):
    passes(checks.check_to_device, answer)
    assert "✔ to_device() moves every tensor" in capsys.readouterr().out


def test_to_device_solution_keeps_namedtuples():
    """The bonus: the reference solution rebuilds a namedtuple as the same namedtuple."""
    Batch = collections.namedtuple("Batch", ["inputs", "targets"])
    moved = to_device(Batch(torch.ones(2), [torch.zeros(1), "x"]), "meta")
    assert type(moved) is Batch and moved.inputs.device.type == "meta"
    assert moved.targets[0].device.type == "meta" and moved.targets[1] == "x"


@pytest.mark.parametrize("answer, expected", [
    (to_device_no_dicts, "recurse into dicts"),
    (to_device_no_tuples, "recurse into tuples"),
    (to_device_no_lists, "recurse into lists"),
    (to_device_tuple_as_list, "a tuple came back as a list"),
    (to_device_moves_everything, "only tensors have `.to()`"),
    (to_device_in_place, "changed the structure it was given"),
    (to_device_forgets_return, "came back as None"),
    (to_device_with_dtype, "pass only the device"),
    (to_device_as_tensor, "came back as a Tensor"),
    (to_device_any_sequence, "a string is a sequence too"),
    (to_device_any_sequence_lazily, "a string is a sequence too"),
    (to_device_ignores_argument, "with the `device` argument you were given"),
    (to_device_unassigned, "`.to()` returns a new tensor"),
    (to_device_star_args, "`tuple()` takes one iterable"),
    (to_device_not_done, "not implemented yet"),
])
def test_to_device_mistakes(answer, expected):
    message = failure(checks.check_to_device, answer)
    assert expected in message
    assert "How to fix it:" in message


def test_an_error_says_what_the_innermost_call_was_given():
    """From the traceback's innermost to_device() frame: its argument's type."""
    message = failure(checks.check_to_device, to_device_star_args)
    assert "in the call to_device(obj, ...) given a plain tuple, not a namedtuple (it has no " \
           "`_fields`)." in message.splitlines()[0]
    message = failure(checks.check_to_device, to_device_any_sequence)
    assert "in the call to_device(obj, ...) given a str, which is not a list, tuple or dict." \
           in message.splitlines()[0]


def test_to_device_messages_name_where():
    message = failure(checks.check_to_device, to_device_no_dicts)
    assert "obj['images']" in message and "inside a dict" in message
    message = failure(checks.check_to_device, to_device_tuple_as_list)
    assert "At obj['extra']" in message and "tuple(to_device(item, device)" in message
    message = failure(checks.check_to_device, to_device_moves_everything)
    assert "AttributeError" in message and "isinstance(obj, torch.Tensor)" in message
    message = failure(checks.check_to_device, to_device_with_dtype)
    assert "an int64 tensor became float32" in message
    message = failure(checks.check_to_device, to_device_as_tensor)
    assert "an int came back as a Tensor" in message


def test_to_device_messages_say_what_came_back_as_it_was_or_as_none():
    """A container returned as the very object passed in, a leaf returned as None on its own:
    what the probe saw, in the first sentence."""
    message = failure(checks.check_to_device, to_device_no_dicts)
    assert ("not on 'meta', the device passed in: to_device() returned the dict obj itself, the "
            "very object it was given, so nothing inside it moved.") in message

    def to_device_without_last_return(obj, device):
        if isinstance(obj, torch.Tensor):
            return obj.to(device)
        if isinstance(obj, (list, tuple)):
            return type(obj)(to_device_without_last_return(item, device) for item in obj)
        if isinstance(obj, dict):
            return {k: to_device_without_last_return(v, device) for k, v in obj.items()}
        return None

    message = failure(checks.check_to_device, to_device_without_last_return)
    assert ("At obj['extra'][1][1], an int came back as None, and to_device(5, device) on its "
            "own returned None.") in message


def test_to_device_empty_containers_fail_only_the_hidden_part():
    checks.check_to_device(to_device_drops_empty)
    for seed in HIDDEN_SEEDS:
        message = failure(checks.check_to_device, to_device_drops_empty, hidden=True, seed=seed)
        assert "came back as None." in message


def test_to_device_leaves_the_caller_structure_alone():
    batch = {"x": torch.ones(2), "y": [torch.zeros(1), 3], "z": (np.ones(2), None)}
    moved = to_device(batch, "meta")
    assert batch["x"].device.type == "cpu" and batch["y"][0].device.type == "cpu"
    assert moved["z"][0] is batch["z"][0] and moved["y"][1] == 3
