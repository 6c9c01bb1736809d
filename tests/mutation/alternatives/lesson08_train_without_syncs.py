"""Right alternatives: imported from tests/checks/lesson08/test_train_without_syncs.py, and own."""
from __future__ import annotations

import torch

from ...checks.lesson08.test_train_without_syncs import train_stacked, train_zeros_total


def train_with_sum_of_list(model, batches, loss_fn, optimizer):
    """Own: Python's sum() over the detached losses, float() once at the end."""
    losses = []
    for batch in batches:
        features, labels = batch
        optimizer.zero_grad()
        outputs = model(features)
        loss = loss_fn(outputs, labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return float(sum(losses)) / len(losses)


def train_with_no_grad_total(model, batches, loss_fn, optimizer):
    """Own: the running total added under no_grad, counted by enumerate."""
    total, count = None, 0
    for count, (features, labels) in enumerate(batches, start=1):  # noqa: B007 - read after
        loss = loss_fn(model(features), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            total = loss.clone() if total is None else total.add_(loss)
    return total.item() / count


def train_with_int_start(model, batches, loss_fn, optimizer):
    """Own: a Python 0 that becomes a tensor at the first addition; one .item() at the end."""
    total = 0
    for features, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        total = total + loss.detach()
    return (total / len(batches)).item()


ALTERNATIVES = [train_stacked, train_zeros_total, train_with_sum_of_list,
                train_with_no_grad_total, train_with_int_start]
