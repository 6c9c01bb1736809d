"""Tests of the check course_utils/checks/lesson10/train_until.py."""
from __future__ import annotations

import torch

from ...probe_roundtrip import failure, graded, passes
from ...solutions import solution
from .shared import LESSON, check_until

train_until = solution(LESSON, "train_until")


def until_with_list(model, batches, loss_fn, optimizer, target, every):
    """Right: the window's detached losses in a list, stacked and read once per check."""
    window = []
    for steps, (features, labels) in enumerate(batches, start=1):
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        window.append(loss.detach())
        if len(window) == every:
            if torch.stack(window).mean().item() <= target:
                return steps
            window = []
    return steps


def until_every_step(model, batches, loss_fn, optimizer, target, every):
    steps, window = 0, 0.0
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        steps += 1
        window += loss.item()
        if steps % every == 0:
            if window / every <= target:
                return steps
            window = 0.0
    return steps


def until_no_reset(model, batches, loss_fn, optimizer, target, every):
    steps, total = 0, None
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        steps += 1
        total = loss.detach() if total is None else total + loss.detach()
        if steps % every == 0 and total.item() / steps <= target:
            return steps
    return steps


def until_last_loss(model, batches, loss_fn, optimizer, target, every):
    steps = 0
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        steps += 1
        if steps % every == 0 and loss.item() <= target:
            return steps
    return steps


def test_the_solution_and_a_right_alternative_pass():
    for answer in (train_until, until_with_list):
        passes(check_until, answer, seeds=[0])


def test_each_mistake_is_named():
    assert "read a device value after step 1" in failure(check_until, until_every_step)
    message = failure(check_until, until_no_reset, hidden=True, seed=0)
    assert "reset" in message
    assert graded(check_until, (until_last_loss,), hidden=True, seed=0).fraction < 1
