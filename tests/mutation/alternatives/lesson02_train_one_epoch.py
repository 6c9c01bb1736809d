"""Right alternatives: copied from the lesson's tests/test_checks_lessonNN.py, and own."""
from __future__ import annotations

import torch


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
