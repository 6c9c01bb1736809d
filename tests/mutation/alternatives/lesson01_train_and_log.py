"""Right alternatives: imported from tests/checks/lesson01/test_train_and_log.py, and own."""
from __future__ import annotations

from ...checks.lesson01.test_train_and_log import train_and_log_in_place, train_and_log_stacked


def train_and_log_enumerate(step, n_steps, log_every):
    """Own: enumerate from 1, the block's sum reset with a fresh 0-d tensor."""
    logged, running = [], 0
    for count, _ in enumerate(range(n_steps), start=1):
        running = step().detach() + running
        if count % log_every == 0:
            logged.append(running.item() / log_every)
            running = 0
    return logged


def train_and_log_nested_loops(step, n_steps, log_every):
    """Own: one loop over blocks, one over the steps of a block; a partial last block unlogged."""
    logged = []
    for _ in range(n_steps // log_every):
        block = sum(step().detach() for _ in range(log_every))
        logged.append((block / log_every).item())
    for _ in range(n_steps % log_every):
        step()
    return logged


def train_and_log_no_grad_sum(step, n_steps, log_every):
    """Own: a detached 0-d total made from the first loss, added with Tensor.add, read with
    float()."""
    logged, running = [], None
    for i in range(1, n_steps + 1):
        loss = step().detach()
        running = loss if running is None else running.add(loss)
        if i % log_every == 0:
            logged.append(float(running) / log_every)
            running = None
    return logged


ALTERNATIVES = [train_and_log_stacked, train_and_log_in_place, train_and_log_enumerate,
                train_and_log_nested_loops, train_and_log_no_grad_sum]
