"""Tests of the check course_utils/checks/lesson02/train_one_epoch.py."""
from __future__ import annotations

import pytest
import torch

from course_utils import checks

from ...probe_roundtrip import failure, passes
from .shared import _epoch, train_one_epoch

# ================================================================ train_one_epoch

def epoch_zero_grad_after_forward(model, loader, loss_fn, optimizer, device):
    """The appendix's order: forward, loss, zero_grad, backward, step. Also right."""
    model.train()
    total = 0.0
    for features, labels in loader:
        features, labels = features.to(device), labels.to(device)
        loss = loss_fn(model(features), labels)
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(loader)


def epoch_detached_total(model, loader, loss_fn, optimizer, device):
    """One sync per epoch: a detached running total on the device. Also right."""
    model.train()
    total = torch.zeros((), device=device)
    for features, labels in loader:
        features, labels = features.to(device), labels.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return total.item() / len(loader)


def epoch_weighted_by_examples(model, loader, loss_fn, optimizer, device):
    """Mean over examples; equal to the mean over batches when batches are equal. Right."""
    model.train()
    total = 0.0
    for features, labels in loader:
        features, labels = features.to(device), labels.to(device)
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(labels)
    return total / len(loader.dataset)


def epoch_not_implemented(model, loader, loss_fn, optimizer, device):
    raise NotImplementedError()


EPOCH_MISTAKES = [
    (_epoch(move="none"), "the data were not moved to the model's device"),
    (_epoch(device_name="global"), "with the `device` argument (not a global variable)"),
    (_epoch(move="features"), "the labels were not moved"),
    (_epoch(zero_grad="never"), "without zero_grad, gradients accumulate"),
    (_epoch(zero_grad="once"), "without zero_grad, gradients accumulate"),
    (_epoch(train=False), "call `model.train()`"),
    (_epoch(keep="tensor"), "still carries an autograd graph"),
    (_epoch(keep="tensor", returns="tensor-then-item"), "graphs of earlier batches were still"),
    (_epoch(move="unassigned"), "`.to()` returns a new tensor and leaves the original"),
    (_epoch(keep="list"), "graphs of earlier batches were still alive"),
    (_epoch(keep="detached"), "returned a tensor, not a Python float"),
    (_epoch(step=False), "weights did not change during the epoch: optimizer.step() was never"),
    (_epoch(zero_grad="between"), ("weights did not change during the epoch: each of the 4 "
                                   "optimizer.step() calls found no gradient to apply")),
    (_epoch(returns="last"), "loss of the last batch only"),
    (_epoch(returns="sum"), "sum of the batch losses, not their mean"),
    (_epoch(own_loss=True), "never called the loss function it was given"),
    (_epoch(no_grad=True), "ran with gradients disabled"),
    (epoch_not_implemented, "not implemented yet"),
]


@pytest.mark.parametrize("answer", [train_one_epoch, epoch_zero_grad_after_forward,
                                    epoch_detached_total, epoch_weighted_by_examples])
def test_train_one_epoch_correct(answer, capsys):
    passes(checks.check_train_one_epoch, answer)
    assert "✔" in capsys.readouterr().out


@pytest.mark.parametrize("answer, expected", EPOCH_MISTAKES)
@pytest.mark.parametrize("hidden, seed", [(False, None), (True, 3)])
def test_train_one_epoch_mistakes(answer, expected, hidden, seed):
    message = failure(checks.check_train_one_epoch, answer, hidden=hidden, seed=seed)
    assert expected in message
    assert "How to fix it:" in message


def test_kept_loss_messages_say_what_backward_frees_and_what_stays():
    """Lesson 02's correction: backward frees the saved activations; kept losses hold nodes."""
    summed = failure(checks.check_train_one_epoch, _epoch(keep="tensor"))
    assert "keeps every batch's graph nodes alive in host memory" in summed
    listed = failure(checks.check_train_one_epoch, _epoch(keep="list"))
    assert "backward() frees the saved activations" in listed
    assert "each kept loss holds its graph's nodes, so host memory grows" in listed
    for message in (summed, listed):
        assert "GPU memory" not in message and "activations alive" not in message


def test_train_one_epoch_wrong_value_reveals_only_visible_expectation():
    def off_by_a_bit(model, loader, loss_fn, optimizer, device):
        return train_one_epoch(model, loader, loss_fn, optimizer, device) * 1.01

    assert "expected about" in failure(checks.check_train_one_epoch, off_by_a_bit)
    assert "expected" not in failure(checks.check_train_one_epoch, off_by_a_bit, hidden=True,
                                     seed=3)
