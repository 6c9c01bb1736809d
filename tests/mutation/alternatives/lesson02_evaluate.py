"""Right alternatives: imported from tests/checks/lesson02/test_evaluate.py, and own."""
from __future__ import annotations

import torch

from ...checks.lesson02.test_evaluate import evaluate_no_grad_dataset_length


def evaluate_on_device_counts(model, loader, device):
    """Own: counts kept on the device, one read at the end."""
    model.eval()
    correct = torch.zeros((), dtype=torch.long, device=device)
    total = 0
    with torch.inference_mode():
        for features, labels in loader:
            labels = labels.to(device)
            correct += (model(features.to(device)).argmax(1) == labels).sum()
            total += labels.numel()
    return correct.item() / total


def evaluate_concatenated(model, loader, device):
    """Own: every prediction gathered, then one comparison."""
    model.train(False)
    predicted, expected = [], []
    with torch.no_grad():
        for features, labels in loader:
            predicted.append(model(features.to(device)).argmax(dim=-1))
            expected.append(labels.to(device))
    return (torch.cat(predicted) == torch.cat(expected)).float().mean().item()


def evaluate_max_indices(model, loader, device):
    """Own: torch.max's indices, a float count."""
    model.eval()
    hits, seen = 0.0, 0
    with torch.no_grad():
        for features, labels in loader:
            features, labels = features.to(device), labels.to(device)
            _, indices = torch.max(model(features), dim=1)
            hits += indices.eq(labels).sum().item()
            seen += len(labels)
    return hits / seen


def evaluate_weighted_batch_means(model, loader, device):
    """Own: each batch's accuracy weighted by its size."""
    model.eval()
    weighted, seen = 0.0, 0
    with torch.inference_mode():
        for features, labels in loader:
            labels = labels.to(device)
            accuracy = (model(features.to(device)).argmax(dim=1) == labels).float().mean()
            weighted += accuracy.item() * labels.shape[0]
            seen += labels.shape[0]
    return weighted / seen


ALTERNATIVES = [evaluate_no_grad_dataset_length, evaluate_on_device_counts,
                evaluate_concatenated, evaluate_max_indices, evaluate_weighted_batch_means]
