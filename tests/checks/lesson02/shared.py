"""What the tests of lesson 02's exercises share."""
from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from ...solutions import solution

LESSON = "02_training_loop"
train_one_epoch = solution(LESSON, "train_one_epoch")
evaluate = solution(LESSON, "evaluate")

GLOBAL_DEVICE = torch.device("cpu")  # a learner's notebook-level `device`


def _move(features, labels, move, where):
    """The batch as a variant moves it ('unassigned': `.to()` called, its result dropped)."""
    if move == "unassigned":
        features.to(where)
        labels.to(where)
    if move in ("both", "features"):
        features = features.to(where)
    if move == "both":
        labels = labels.to(where)
    return features, labels


def _add_loss(total, kept, loss, keep):
    """The running total after one batch, kept as a variant keeps it."""
    if keep == "tensor":
        return total + loss
    if keep == "detached":
        return total + loss.detach()
    if keep == "list":
        kept.append(loss)
        return total
    return total + loss.item()


def _result(total, kept, loss, keep, returns, batches):
    if keep == "list":
        return sum(item.item() for item in kept) / len(kept)
    if returns == "last":
        return loss.item()
    if returns == "sum":
        return total
    if returns == "tensor-then-item":
        return total.item() / batches
    return total / batches


def _epoch(move="both", zero_grad="each", train=True, keep="item", step=True,
           returns="mean", own_loss=False, no_grad=False, device_name="device"):
    """Build one variant of train_one_epoch with one mistake in it."""

    def variant(model, loader, loss_fn, optimizer, device):
        where = GLOBAL_DEVICE if device_name == "global" else device
        if train:
            model.train()
        if zero_grad == "once":
            optimizer.zero_grad()
        total, kept, loss = 0.0, [], None
        for features, labels in loader:
            features, labels = _move(features, labels, move, where)
            if zero_grad == "each":
                optimizer.zero_grad()
            with torch.no_grad() if no_grad else contextlib.nullcontext():
                outputs = model(features)
            loss = (F.cross_entropy if own_loss else loss_fn)(outputs, labels)
            loss.backward()
            if zero_grad == "between":
                optimizer.zero_grad()
            if step:
                optimizer.step()
            total = _add_loss(total, kept, loss, keep)
        return _result(total, kept, loss, keep, returns, len(loader))

    return variant


def _evaluate(move=True, eval_mode=True, no_grad=True, returns="fraction"):
    def variant(model, loader, device):
        if eval_mode:
            model.eval()
        correct, total, per_batch = 0, 0, []
        with torch.no_grad() if no_grad else torch.enable_grad():
            for features, labels in loader:
                if move:
                    features, labels = features.to(device), labels.to(device)
                hits = model(features).argmax(dim=1) == labels
                correct = correct + (hits.sum() if returns == "tensor" else hits.sum().item())
                total += len(labels)
                per_batch.append(hits.float().mean().item())
        if returns == "percent":
            return 100 * correct / total
        if returns == "count":
            return correct
        if returns == "batch-mean":
            return sum(per_batch) / len(per_batch)
        return correct / total

    return variant
