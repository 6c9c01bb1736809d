"""Right alternatives: imported from tests/checks/lesson10/test_train_until.py, and own."""
from __future__ import annotations

import torch

from ...checks.lesson10.test_train_until import until_with_list


def until_with_zeros(model, batches, loss_fn, optimizer, target, every):
    """Own: a zero tensor as the window, filled in place, compared on the device."""
    window, steps = torch.zeros(()), 0
    for features, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        steps += 1
        window += loss.detach()
        if steps % every == 0:
            if bool(window / every <= target):
                return steps
            window.zero_()
    return steps


def until_with_enumerate(model, batches, loss_fn, optimizer, target, every):
    """Own: enumerate from 1, the mean read with float(), counted steps returned at the end."""
    total, steps = None, 0
    for steps, (features, labels) in enumerate(batches, 1):
        loss = loss_fn(model(features), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total = loss.detach() if total is None else total + loss.detach()
        if steps % every == 0:
            mean = float(total) / every
            total = None
            if mean <= target:
                break
    return steps


def until_with_no_grad(model, batches, loss_fn, optimizer, target, every):
    """Own: the window added under no_grad, and a countdown instead of a modulo."""
    window, left, steps = 0.0, every, 0
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        steps += 1
        with torch.no_grad():
            window = window + loss
        left -= 1
        if left == 0:
            if (window / every).item() <= target:
                return steps
            window, left = 0.0, every
    return steps


def until_with_mean_stack(model, batches, loss_fn, optimizer, target, every):
    """Own: a list of detached losses, the window as its last `every` entries."""
    losses = []
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        if len(losses) % every == 0 and torch.stack(losses[-every:]).mean().item() <= target:
            break
    return len(losses)


ALTERNATIVES = [until_with_list, until_with_zeros, until_with_enumerate, until_with_no_grad,
                until_with_mean_stack]
