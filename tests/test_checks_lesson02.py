"""Lesson 02 checks: right answers pass, each typical mistake gets its own hint."""
from __future__ import annotations

import contextlib
import json

import pytest
import torch
import torch.nn.functional as F

from course_utils import checks

from .probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from .solutions import solution

LESSON = "02_training_loop"
train_one_epoch = solution(LESSON, "train_one_epoch")
evaluate = solution(LESSON, "evaluate")
save_checkpoint = solution(LESSON, "checkpoint", "save_checkpoint")
load_checkpoint = solution(LESSON, "checkpoint", "load_checkpoint")

GLOBAL_DEVICE = torch.device("cpu")  # a learner's notebook-level `device`




# ================================================================ train_one_epoch

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


def epoch_not_implemented(model, loader, loss_fn, optimizer, device):
    raise NotImplementedError()


EPOCH_MISTAKES = [
    (_epoch(move="none"), "the data were not moved to the model's device"),
    (_epoch(device_name="global"), "with the `device` argument (not a global variable)"),
    (_epoch(move="features"), "the labels were not moved"),
    (_epoch(zero_grad="never"), "without zero_grad, gradients accumulate"),
    (_epoch(zero_grad="once"), "without zero_grad, gradients accumulate"),
    (_epoch(train=False), "call `model.train()`"),
    (_epoch(keep="tensor"), "still carries an autograd graph"),
    (_epoch(keep="tensor", returns="tensor-then-item"), "graphs of earlier batches were still"),
    (_epoch(move="unassigned"), "`.to()` returns a new tensor and leaves the original"),
    (_epoch(keep="list"), "graphs of earlier batches were still alive"),
    (_epoch(keep="detached"), "returned a tensor, not a Python float"),
    (_epoch(step=False), "weights did not change"),
    (_epoch(zero_grad="between"), "weights did not change"),
    (_epoch(returns="last"), "loss of the last batch only"),
    (_epoch(returns="sum"), "sum of the batch losses, not their mean"),
    (_epoch(own_loss=True), "never called the loss function it was given"),
    (_epoch(no_grad=True), "ran with gradients disabled"),
    (epoch_not_implemented, "not implemented yet"),
]


@pytest.mark.parametrize("answer", [train_one_epoch, epoch_zero_grad_after_forward,
                                    epoch_detached_total, epoch_weighted_by_examples])
def test_train_one_epoch_correct(answer, capsys):
    passes(checks.check_train_one_epoch, answer)
    assert "✔" in capsys.readouterr().out


@pytest.mark.parametrize("answer, expected", EPOCH_MISTAKES)
@pytest.mark.parametrize("hidden, seed", [(False, None), (True, 3)])
def test_train_one_epoch_mistakes(answer, expected, hidden, seed):
    message = failure(checks.check_train_one_epoch, answer, hidden=hidden, seed=seed)
    assert expected in message
    assert "How to fix it:" in message


def test_kept_loss_messages_say_what_backward_frees_and_what_stays():
    """Lesson 02's correction: backward frees the saved activations; kept losses hold nodes."""
    summed = failure(checks.check_train_one_epoch, _epoch(keep="tensor"))
    assert "keeps every batch's graph nodes alive in host memory" in summed
    listed = failure(checks.check_train_one_epoch, _epoch(keep="list"))
    assert "backward() frees the saved activations" in listed
    assert "each kept loss holds its graph's nodes, so host memory grows" in listed
    for message in (summed, listed):
        assert "GPU memory" not in message and "activations alive" not in message


def test_train_one_epoch_wrong_value_reveals_only_visible_expectation():
    def off_by_a_bit(model, loader, loss_fn, optimizer, device):
        return train_one_epoch(model, loader, loss_fn, optimizer, device) * 1.01

    assert "expected about" in failure(checks.check_train_one_epoch, off_by_a_bit)
    assert "expected" not in failure(checks.check_train_one_epoch, off_by_a_bit, hidden=True,
                                     seed=3)


# ================================================================ evaluate

def evaluate_no_grad_dataset_length(model, loader, device):
    model.to(device).eval()
    correct = 0
    with torch.no_grad():
        for features, labels in loader:
            predictions = model(features.to(device)).argmax(dim=1)
            correct += (predictions == labels.to(device)).sum().item()
    return correct / len(loader.dataset)


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


def evaluate_not_implemented(model, loader, device):
    raise NotImplementedError()


EVALUATE_MISTAKES = [
    (_evaluate(move=False), "the data were not moved to the model's device"),
    (_evaluate(eval_mode=False), "dropout was still active"),
    (_evaluate(no_grad=False), "Gradients were enabled during evaluation"),
    (_evaluate(returns="tensor"), "returned a tensor, not a Python float"),
    (_evaluate(returns="percent"), "returned a percentage"),
    (_evaluate(returns="count"), "returned the number of correct predictions"),
    (_evaluate(returns="batch-mean"), "averaged the accuracies of the batches"),
    (evaluate_not_implemented, "not implemented yet"),
]


@pytest.mark.parametrize("answer", [evaluate, evaluate_no_grad_dataset_length])
def test_evaluate_correct(answer, capsys):
    passes(checks.check_evaluate_accuracy, answer)
    assert "✔" in capsys.readouterr().out


@pytest.mark.parametrize("answer, expected", EVALUATE_MISTAKES)
@pytest.mark.parametrize("hidden, seed", [(False, None), (True, 3)])
def test_evaluate_mistakes(answer, expected, hidden, seed):
    message = failure(checks.check_evaluate_accuracy, answer, hidden=hidden, seed=seed)
    assert expected in message
    assert "How to fix it:" in message


def test_evaluate_with_autograd_message_says_the_activations_are_saved_for_nothing():
    message = failure(checks.check_evaluate_accuracy, _evaluate(no_grad=False))
    assert "saved its activations for a backward pass that never comes" in message
    assert "keeps them alive as long as an output or a loss is kept" in message


def test_evaluate_hidden_inputs_have_a_short_last_batch():
    for seed in HIDDEN_SEEDS:
        inputs = checks.check_evaluate_accuracy.make_inputs(seed, True)
        assert len(inputs["X"]) % inputs["batch_size"] != 0


# ================================================================ checkpoints

def load_checkpoint_via_cpu(path, model, optimizer, device):
    """Load onto the CPU first, then move: also right (and kind to GPU memory)."""
    model.to(device)
    checkpoint = torch.load(path, map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    return checkpoint["epoch"]


def save_objects(model, optimizer, epoch, path):
    torch.save({"model": model, "optimizer": optimizer, "epoch": epoch}, path)


def save_nothing(model, optimizer, epoch, path):
    pass


def _load(map_location=True, weights_only=True, order=("model", "to", "optimizer"),
          returns="epoch"):
    def variant(path, model, optimizer, device):
        kwargs = {"weights_only": weights_only}
        if map_location:
            kwargs["map_location"] = device
        checkpoint = torch.load(path, **kwargs)
        for step in order:
            if step == "model":
                model.load_state_dict(checkpoint["model"])
            elif step == "to":
                model.to(device)
            elif step == "optimizer":
                optimizer.load_state_dict(checkpoint["optimizer"])
        return checkpoint["epoch"] if returns == "epoch" else (0 if returns == "zero" else None)

    return variant


def load_ignoring_device(path, model, optimizer, device):
    checkpoint = torch.load(path, weights_only=True, map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    return checkpoint["epoch"]


def load_hard_coded_cpu(path, model, optimizer, device):
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model.to("cpu")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    return checkpoint["epoch"]


LOAD_MISTAKES = [
    (load_ignoring_device, "did not move it to the `device` it was given"),
    (load_hard_coded_cpu, "did not move it to the `device` it was given"),
    (_load(map_location=False), "without `map_location`"),
    (_load(weights_only=False), "`weights_only=False`"),
    (_load(order=("model", "optimizer", "to")), "loaded before the model was moved"),
    (_load(order=("model", "optimizer")), "did not move it to the `device` it was given"),
    (_load(order=("model", "to")), "did not restore the optimizer"),
    (_load(order=("to", "optimizer")), "weights after load_checkpoint() differ"),
    (_load(returns="none"), "not the epoch (an int)"),
    (_load(returns="zero"), "not the epoch that was saved"),
]


def test_checkpoint_correct(capsys):
    passes(checks.check_checkpoint_round_trip, save_checkpoint, load_checkpoint)
    passes(checks.check_checkpoint_round_trip, save_checkpoint, load_checkpoint_via_cpu)
    assert "✔" in capsys.readouterr().out


@pytest.mark.parametrize("load, expected", LOAD_MISTAKES)
@pytest.mark.parametrize("hidden, seed", [(False, None), (True, 3)])
def test_checkpoint_load_mistakes(load, expected, hidden, seed):
    message = failure(checks.check_checkpoint_round_trip, save_checkpoint, load,
                      hidden=hidden, seed=seed)
    assert expected in message
    assert "How to fix it:" in message


@pytest.mark.parametrize("save, load, expected", [
    (save_objects, load_checkpoint, "pickled a whole model or optimizer object"),
    (save_objects, _load(weights_only=False), "pickled a whole model or optimizer object"),
    (save_nothing, load_checkpoint, "without writing a file"),
])
def test_checkpoint_save_mistakes(save, load, expected):
    assert expected in failure(checks.check_checkpoint_round_trip, save, load)


def test_checkpoint_hidden_epoch_is_not_revealed():
    inputs = checks.check_checkpoint_round_trip.make_inputs(3, True)
    message = failure(checks.check_checkpoint_round_trip, save_checkpoint, _load(returns="zero"),
                      hidden=True, seed=3)
    assert f"saved: {inputs['epoch']}" not in message
    assert "saved: 3" in failure(checks.check_checkpoint_round_trip, save_checkpoint,
                                 _load(returns="zero"))


# ================================================================ inputs and probes

def test_hidden_inputs_vary_with_the_seed():
    """Checks every lesson-02 check draws different hidden cases for different seeds."""
    for check in (checks.check_train_one_epoch, checks.check_evaluate_accuracy,
                  checks.check_checkpoint_round_trip):
        made = [check.make_inputs(seed, True) for seed in HIDDEN_SEEDS]
        assert len({json.dumps(inputs) for inputs in made}) > 1
        assert check.make_inputs(0, False) not in made


CASES = [
    (checks.check_train_one_epoch, (train_one_epoch,), True),
    (checks.check_train_one_epoch, (_epoch(keep="list"),), False),
    (checks.check_evaluate_accuracy, (evaluate,), True),
    (checks.check_evaluate_accuracy, (_evaluate(move=False),), False),
    (checks.check_checkpoint_round_trip, (save_checkpoint, load_checkpoint), True),
    (checks.check_checkpoint_round_trip, (save_checkpoint, _load(map_location=False)), False),
]


@pytest.mark.parametrize("check, answers, right", CASES)
@pytest.mark.parametrize("hidden, seed", [(False, 0), (True, 42)])
def test_probe_source_is_self_contained(check, answers, right, hidden, seed):
    verdict = graded(check, answers, hidden=hidden, seed=seed)  # asserts both ways agree
    assert verdict.passed is right


def test_probes_leave_torch_as_they_found_it():
    """Patched functions are restored and the global random generator is not touched."""
    before = (torch.save, torch.load, torch.nn.Module.to, torch.nn.Module.load_state_dict)
    state = torch.get_rng_state()
    checks.check_train_one_epoch(train_one_epoch)
    checks.check_evaluate_accuracy(evaluate)
    checks.check_checkpoint_round_trip(save_checkpoint, load_checkpoint)
    assert (torch.save, torch.load, torch.nn.Module.to, torch.nn.Module.load_state_dict) == before
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.is_grad_enabled()
