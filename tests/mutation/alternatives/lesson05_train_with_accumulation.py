"""Right alternatives: copied from tests/test_checks_lesson05.py, and own."""
from __future__ import annotations

import numpy as np
import torch


def accumulate_in_one_loop(model, loss_fn, optimizer, micro_batches, accumulation_steps):
    """Right: the source's loop, fixed for the last, smaller group."""
    n, steps = len(micro_batches), 0
    for i, (inputs, targets) in enumerate(micro_batches):
        group_size = min(accumulation_steps, n - i // accumulation_steps * accumulation_steps)
        (loss_fn(model(inputs), targets) / group_size).backward()
        if (i + 1) % accumulation_steps == 0 or i + 1 == n:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            steps += 1
    return steps


def accumulate_zeroing_at_group_start(model, loss_fn, optimizer, micro_batches,
                                      accumulation_steps):
    """Right: zero_grad() at the start of each group (model.zero_grad, another API)."""
    steps = 0
    for start in range(0, len(micro_batches), accumulation_steps):
        model.zero_grad()
        group = micro_batches[start:start + accumulation_steps]
        for inputs, targets in group:
            loss = loss_fn(model(inputs), targets)
            (loss * (1 / len(group))).backward()
        optimizer.step()
        steps += 1
    return steps


def accumulate_dividing_the_gradients(model, loss_fn, optimizer, micro_batches,
                                      accumulation_steps):
    """Right: unscaled losses, the summed gradients divided by the group's size before step()."""
    steps = 0
    for start in range(0, len(micro_batches), accumulation_steps):
        group = micro_batches[start:start + accumulation_steps]
        for inputs, targets in group:
            torch.autograd.backward(loss_fn(model(inputs), targets))
        for parameter in model.parameters():
            parameter.grad /= len(group)
        optimizer.step()
        for parameter in model.parameters():
            parameter.grad = None  # zeroed by hand, as zero_grad() does
        steps += 1
    return steps


def accumulate_keeping_zeroed_tensors(model, loss_fn, optimizer, micro_batches,
                                      accumulation_steps):
    """Right: zero_grad(set_to_none=False), a loss scaled with .div(), a step after the loop."""
    pending, steps = 0, 0
    for i, (inputs, targets) in enumerate(micro_batches):
        size = min(accumulation_steps, len(micro_batches) - i // accumulation_steps
                   * accumulation_steps)
        loss_fn(model(inputs), targets).div(size).backward()
        pending += 1
        if pending == accumulation_steps:
            optimizer.step()
            optimizer.zero_grad(set_to_none=False)
            pending, steps = 0, steps + 1
    if pending:
        optimizer.step()
        optimizer.zero_grad(set_to_none=False)
        steps += 1
    return steps


def accumulate_with_numpy_groups(model, loss_fn, optimizer, micro_batches,
                                 accumulation_steps):
    """Right: groups from np.array_split over the positions; a weighted loss per micro-batch."""
    groups = np.array_split(np.arange(len(micro_batches)),
                            range(accumulation_steps, len(micro_batches), accumulation_steps))
    for group in groups:
        weight = 1.0 / len(group)
        for position in group:
            inputs, targets = micro_batches[position]
            (weight * loss_fn(model(inputs), targets)).backward()
        optimizer.step()
        optimizer.zero_grad()
    return len(groups)


ALTERNATIVES = [accumulate_in_one_loop, accumulate_zeroing_at_group_start,
                accumulate_dividing_the_gradients, accumulate_keeping_zeroed_tensors,
                accumulate_with_numpy_groups]
