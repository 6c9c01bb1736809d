"""Right alternatives: imported from tests/checks/lesson02/test_train_one_epoch.py, and own."""
from __future__ import annotations

from ...checks.lesson02.test_train_one_epoch import (
    epoch_detached_total,
    epoch_weighted_by_examples,
    epoch_zero_grad_after_forward,
)


def epoch_with_enumerate(model, loader, loss_fn, optimizer, device):
    """Own: set_to_none zeroing, non_blocking moves, a count kept by enumerate."""
    model.train(True)
    losses, count = 0.0, 0
    for count, (features, labels) in enumerate(loader, start=1):  # noqa: B007 - read after
        features = features.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        outputs = model(features)
        loss = loss_fn(outputs, labels)
        loss.backward()
        optimizer.step()
        losses += float(loss)
    return losses / count


def epoch_list_of_floats(model, loader, loss_fn, optimizer, device):
    """Own: a list of the batches' losses as floats, statistics at the end."""
    model.train()
    history = []
    for batch in loader:
        features, labels = (tensor.to(device) for tensor in batch)
        for parameter in model.parameters():
            parameter.grad = None
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        history.append(loss.detach().cpu().item())
    return sum(history) / len(history)


ALTERNATIVES = [epoch_zero_grad_after_forward, epoch_detached_total, epoch_weighted_by_examples,
                epoch_with_enumerate, epoch_list_of_floats]
