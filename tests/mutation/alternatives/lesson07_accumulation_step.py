"""Right alternatives: copied from tests/test_checks_lesson07.py, and own."""
from __future__ import annotations

from contextlib import ExitStack, nullcontext


def accumulation_exit_stack(ddp_model, micro_batches, loss_fn, optimizer):
    """Right: the first k-1 micro-batches under one no_sync block, the last one after it."""
    optimizer.zero_grad()
    *first, last = micro_batches
    with ddp_model.no_sync():
        for features, labels in first:
            (loss_fn(ddp_model(features), labels) / len(micro_batches)).backward()
    features, labels = last
    (loss_fn(ddp_model(features), labels) / len(micro_batches)).backward()
    optimizer.step()


def accumulation_zero_grad_last(ddp_model, micro_batches, loss_fn, optimizer):
    """Right: zero the gradients after the step, through the module, with an ExitStack."""
    for index, (features, labels) in enumerate(micro_batches):
        with ExitStack() as stack:
            if index < len(micro_batches) - 1:
                stack.enter_context(ddp_model.no_sync())
            loss = loss_fn(ddp_model(features), labels)
            (loss * (1 / len(micro_batches))).backward()
    optimizer.step()
    ddp_model.zero_grad()


def accumulation_grads_divided(ddp_model, micro_batches, loss_fn, optimizer):
    """Right: backward the plain losses, then divide the accumulated gradients by their number
    (after the all-reduce: the same average); zero_grad(set_to_none=False)."""
    optimizer.zero_grad(set_to_none=False)
    count = len(micro_batches)
    for index, (features, labels) in enumerate(micro_batches):
        context = nullcontext() if index == count - 1 else ddp_model.no_sync()
        with context:
            loss_fn(ddp_model(features), labels).backward()
    for parameter in ddp_model.parameters():
        parameter.grad.div_(count)
    optimizer.step()


def accumulation_sliced(ddp_model, micro_batches, loss_fn, optimizer):
    """Right: the last micro-batch taken apart by slicing, the loss divided with .div()."""
    ddp_model.zero_grad(set_to_none=True)
    k = len(micro_batches)
    for features, labels in micro_batches[:-1]:
        with ddp_model.no_sync():
            loss_fn(ddp_model(features), labels).div(k).backward()
    features, labels = micro_batches[-1]
    loss_fn(ddp_model(features), labels).div(k).backward()
    optimizer.step()


def accumulation_weighted_by_samples(ddp_model, micro_batches, loss_fn, optimizer):
    """Right: each micro-batch's mean loss weighted by its share of the samples (the mean over
    all samples; with micro-batches of one size, the mean of their losses)."""
    optimizer.zero_grad()
    total = sum(len(labels) for _, labels in micro_batches)
    *early, last = micro_batches
    for features, labels in early:
        with ddp_model.no_sync():
            (loss_fn(ddp_model(features), labels) * len(labels) / total).backward()
    features, labels = last
    (loss_fn(ddp_model(features), labels) * len(labels) / total).backward()
    optimizer.step()


ALTERNATIVES = [accumulation_exit_stack, accumulation_zero_grad_last, accumulation_grads_divided,
                accumulation_sliced, accumulation_weighted_by_samples]
