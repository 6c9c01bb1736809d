"""Tests of the check course_utils/checks/lesson08/train_without_syncs.py."""
from __future__ import annotations

import torch

from ...probe_roundtrip import failure, passes
from ...solutions import solution
from .shared import LESSON, SEEDS, check_syncs

train_without_syncs = solution(LESSON, "train_without_syncs")


# ------------------------------------------------------------------ train_without_syncs

def train_stacked(model, batches, loss_fn, optimizer):
    """Right: keep the detached losses, stack them once after the loop."""
    losses = []
    for features, labels in batches:
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
    return torch.stack(losses).mean().item()


def train_zeros_total(model, batches, loss_fn, optimizer):
    """Right: a zero tensor as the running total, divided on the device."""
    total = torch.zeros(())
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return (total / len(batches)).item()


def train_no_grad_total(model, batches, loss_fn, optimizer):
    """Right: the total added under torch.no_grad(), which builds no graph either."""
    total = torch.zeros(())
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            total += loss
    return total.item() / len(batches)


def train_without_detach(model, batches, loss_fn, optimizer):
    """The walkthrough's mistake: the total keeps every step's autograd graph."""
    total = 0.0
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        total += loss
    return total.item() / len(batches)


def train_list_of_losses(model, batches, loss_fn, optimizer):
    losses = []
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        losses.append(loss)
    return torch.stack(losses).mean().item()


def train_logged(model, batches, loss_fn, optimizer):
    total = 0.0
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / len(batches)


READS = {"float(loss)": float, "bool(loss < best)": lambda loss: bool(loss < 99.0),
         "print(loss)": repr, "loss.cpu()": lambda loss: loss.cpu(),
         "loss.tolist()": lambda loss: loss.tolist()}


def with_line(line):
    """The solution's loop with one read of the loss added after optimizer.step()."""
    def train(model, batches, loss_fn, optimizer):
        total = None
        for features, labels in batches:
            optimizer.zero_grad()
            loss = loss_fn(model(features), labels)
            loss.backward()
            optimizer.step()
            total = loss.detach() if total is None else total + loss.detach()
            READS[line](loss)
        return total.item() / len(batches)
    return train


def train_returns_tensor(model, batches, loss_fn, optimizer):
    total = 0
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        total = total + loss.detach()
    return total / len(batches)


def train_no_zero_grad(model, batches, loss_fn, optimizer):
    total = 0
    for features, labels in batches:
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        total = total + loss.detach()
    return total.item() / len(batches)


def train_returns_sum(model, batches, loss_fn, optimizer):
    total = 0
    for features, labels in batches:
        optimizer.zero_grad()
        loss = loss_fn(model(features), labels)
        loss.backward()
        optimizer.step()
        total = total + loss.detach()
    return total.item()


def test_train_without_syncs_right_answers_keep_full_marks():
    passes(check_syncs, train_without_syncs, seeds=SEEDS)
    for answer in (train_stacked, train_zeros_total, train_no_grad_total):
        passes(check_syncs, answer, seeds=[1])


def test_a_total_without_detach_is_told_to_detach():
    """Walkthrough r4 M3: the exercise asks for loss.detach(); a total of the losses themselves
    (or a list of them, stacked) keeps each step's graph alive and must not pass."""
    for answer in (train_without_detach, train_list_of_losses):
        message = failure(check_syncs, answer)
        assert message.startswith("train_without_syncs added the loss itself to a running total")
        assert "add loss.detach() to the total, not loss." in message


def test_item_every_step_is_named_as_a_sync_every_step():
    message = failure(check_syncs, train_logged)
    assert message.startswith("train_without_syncs read a value from the device inside the loop "
                              "(4 reads for 4 batches, the first during batch 0)")
    assert "every step" in message and "call .item() once, after the loop" in message


def test_each_hidden_read_counts_as_a_sync():
    for line in READS:
        assert "inside the loop" in failure(check_syncs, with_line(line)), line


def test_a_tensor_returned_is_told_to_read_it_once():
    message = failure(check_syncs, train_returns_tensor)
    assert message.startswith("train_without_syncs returned 'Tensor', not a Python float")


def test_missing_zero_grad_is_found_from_the_weights():
    message = failure(check_syncs, train_no_zero_grad)
    assert "call optimizer.zero_grad()" in message
    assert ("differ from those of the original loop: in 3 of 4 backward passes the parameters "
            "still held the previous batch's gradient") in message


def test_a_missing_backward_is_named_by_the_probe():
    def train_without_backward(model, batches, loss_fn, optimizer):
        total = 0.0
        for features, labels in batches:
            optimizer.zero_grad()
            total = total + loss_fn(model(features), labels).detach()
            optimizer.step()
        return total.item() / len(batches)
    message = failure(check_syncs, train_without_backward)
    assert "no backward pass reached the model's parameters." in message


def test_the_sum_instead_of_the_mean():
    assert "the sum of the losses" in failure(check_syncs, train_returns_sum)


def test_no_step_and_two_reads_after_the_loop():
    def no_step(model, batches, loss_fn, optimizer):
        total = sum(loss_fn(model(x), y).detach() for x, y in batches)
        return total.item() / len(batches)

    def two_reads(model, batches, loss_fn, optimizer):
        total = torch.zeros((), device=next(model.parameters()).device)
        for x, y in batches:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.detach()
        return float(total) / float(total.new_tensor(len(batches)))  # both on the device
    assert "optimizer.step() 0 times" in failure(check_syncs, no_step)
    assert "read 2 device values after the loop" in failure(check_syncs, two_reads)


def test_the_stub_is_not_implemented():
    def stub(model, batches, loss_fn, optimizer):
        raise NotImplementedError()
    assert "not implemented yet" in failure(check_syncs, stub)
