"""Tests of the check course_utils/checks/lesson02/checkpoint_round_trip.py."""
from __future__ import annotations

import json

import pytest
import torch

from course_utils import checks

from ...probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from ...solutions import solution
from .shared import LESSON, _epoch, _evaluate, evaluate, train_one_epoch

save_checkpoint = solution(LESSON, "checkpoint", "save_checkpoint")
load_checkpoint = solution(LESSON, "checkpoint", "load_checkpoint")


# ================================================================ checkpoints

def load_checkpoint_via_cpu(path, model, optimizer, device):
    """Load onto the CPU first, then move: also right (and kind to GPU memory)."""
    model.to(device)
    checkpoint = torch.load(path, map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    return checkpoint["epoch"]


def save_objects(model, optimizer, epoch, path):
    torch.save({"model": model, "optimizer": optimizer, "epoch": epoch}, path)


def save_nothing(model, optimizer, epoch, path):
    pass


def _load(map_location=True, weights_only=True, order=("model", "to", "optimizer"),
          returns="epoch"):
    def variant(path, model, optimizer, device):
        kwargs = {"weights_only": weights_only}
        if map_location:
            kwargs["map_location"] = device
        checkpoint = torch.load(path, **kwargs)
        for step in order:
            if step == "model":
                model.load_state_dict(checkpoint["model"])
            elif step == "to":
                model.to(device)
            elif step == "optimizer":
                optimizer.load_state_dict(checkpoint["optimizer"])
        return checkpoint["epoch"] if returns == "epoch" else (0 if returns == "zero" else None)

    return variant


def load_ignoring_device(path, model, optimizer, device):
    checkpoint = torch.load(path, weights_only=True, map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    return checkpoint["epoch"]


def load_hard_coded_cpu(path, model, optimizer, device):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model.to("cpu")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    return checkpoint["epoch"]


LOAD_MISTAKES = [
    (load_ignoring_device, "did not move it to the `device` it was given"),
    (load_hard_coded_cpu, "did not move it to the `device` it was given"),
    (_load(map_location=False), "without `map_location`"),
    (_load(weights_only=False), "`weights_only=False`"),
    (_load(order=("model", "optimizer", "to")), "loaded before the model was moved"),
    (_load(order=("model", "optimizer")), "did not move it to the `device` it was given"),
    (_load(order=("model", "to")), "did not restore the optimizer"),
    (_load(order=("to", "optimizer")), "weights after load_checkpoint() differ"),
    (_load(returns="none"), "not the epoch (an int)"),
    (_load(returns="zero"), "not the epoch that was saved"),
]


def test_checkpoint_correct(capsys):
    passes(checks.check_checkpoint_round_trip, save_checkpoint, load_checkpoint)
    passes(checks.check_checkpoint_round_trip, save_checkpoint, load_checkpoint_via_cpu)
    assert "✔" in capsys.readouterr().out


@pytest.mark.parametrize("load, expected", LOAD_MISTAKES)
@pytest.mark.parametrize("hidden, seed", [(False, None), (True, 3)])
def test_checkpoint_load_mistakes(load, expected, hidden, seed):
    message = failure(checks.check_checkpoint_round_trip, save_checkpoint, load,
                      hidden=hidden, seed=seed)
    assert expected in message
    assert "How to fix it:" in message


@pytest.mark.parametrize("save, load, expected", [
    (save_objects, load_checkpoint, "pickled a whole model or optimizer object"),
    (save_objects, _load(weights_only=False), "pickled a whole model or optimizer object"),
    (save_nothing, load_checkpoint, "without writing a file"),
])
def test_checkpoint_save_mistakes(save, load, expected):
    assert expected in failure(checks.check_checkpoint_round_trip, save, load)


def test_checkpoint_hidden_epoch_is_not_revealed():
    inputs = checks.check_checkpoint_round_trip.make_inputs(3, True)
    message = failure(checks.check_checkpoint_round_trip, save_checkpoint, _load(returns="zero"),
                      hidden=True, seed=3)
    assert f"saved: {inputs['epoch']}" not in message
    assert "saved: 3" in failure(checks.check_checkpoint_round_trip, save_checkpoint,
                                 _load(returns="zero"))


# ================================================================ inputs and probes

def test_hidden_inputs_vary_with_the_seed():
    """Checks every lesson-02 check draws different hidden cases for different seeds."""
    for check in (checks.check_train_one_epoch, checks.check_evaluate_accuracy,
                  checks.check_checkpoint_round_trip):
        made = [check.make_inputs(seed, True) for seed in HIDDEN_SEEDS]
        assert len({json.dumps(inputs) for inputs in made}) > 1
        assert check.make_inputs(0, False) not in made


CASES = [
    (checks.check_train_one_epoch, (train_one_epoch,), True),
    (checks.check_train_one_epoch, (_epoch(keep="list"),), False),
    (checks.check_evaluate_accuracy, (evaluate,), True),
    (checks.check_evaluate_accuracy, (_evaluate(move=False),), False),
    (checks.check_checkpoint_round_trip, (save_checkpoint, load_checkpoint), True),
    (checks.check_checkpoint_round_trip, (save_checkpoint, _load(map_location=False)), False),
]


@pytest.mark.parametrize("check, answers, right", CASES)
@pytest.mark.parametrize("hidden, seed", [(False, 0), (True, 42)])
def test_probe_source_is_self_contained(check, answers, right, hidden, seed):
    verdict = graded(check, answers, hidden=hidden, seed=seed)  # asserts both ways agree
    assert verdict.passed is right


def test_probes_leave_torch_as_they_found_it():
    """Patched functions are restored and the global random generator is not touched."""
    before = (torch.save, torch.load, torch.nn.Module.to, torch.nn.Module.load_state_dict)
    state = torch.get_rng_state()
    checks.check_train_one_epoch(train_one_epoch)
    checks.check_evaluate_accuracy(evaluate)
    checks.check_checkpoint_round_trip(save_checkpoint, load_checkpoint)
    assert (torch.save, torch.load, torch.nn.Module.to, torch.nn.Module.load_state_dict) == before
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.is_grad_enabled()
