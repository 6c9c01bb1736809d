"""Tests of the check course_utils/checks/lesson02/evaluate.py."""
from __future__ import annotations

import pytest
import torch

from course_utils import checks

from ...probe_roundtrip import HIDDEN_SEEDS, failure, passes
from .shared import _evaluate, evaluate

# ================================================================ evaluate

def evaluate_no_grad_dataset_length(model, loader, device):
    model.to(device).eval()
    correct = 0
    with torch.no_grad():
        for features, labels in loader:
            predictions = model(features.to(device)).argmax(dim=1)
            correct += (predictions == labels.to(device)).sum().item()
    return correct / len(loader.dataset)


def evaluate_not_implemented(model, loader, device):
    raise NotImplementedError()


def evaluate_argmax_without_dim(model, loader, device):
    model.to(device).eval()
    correct, total = 0, 0
    with torch.inference_mode():
        for features, labels in loader:
            predictions = model(features.to(device)).argmax()  # one index for the whole batch
            correct += (predictions == labels.to(device)).sum().item()
            total += len(labels)
    return correct / total


def evaluate_counting_tensors(model, loader, device):
    model.to(device).eval()
    correct, total = 0, 0
    with torch.inference_mode():
        for features, labels in loader:
            predictions = model(features.to(device)).argmax(dim=1)
            correct += (predictions == labels.to(device)).sum()  # a tensor: no .item()
            total += len(labels)
    return correct / total


def evaluate_never_looping(model, loader, device):
    model.to(device).eval()
    correct, total = 0, 0
    return correct / total


EVALUATE_MISTAKES = [
    (_evaluate(move=False), "the data were not moved to the model's device"),
    (_evaluate(eval_mode=False), "dropout was still active"),
    (_evaluate(no_grad=False), "Gradients were enabled during evaluation"),
    (_evaluate(returns="tensor"), "returned a tensor, not a Python float"),
    (_evaluate(returns="percent"), "returned a percentage"),
    (_evaluate(returns="count"), "returned the number of correct predictions"),
    (_evaluate(returns="batch-mean"), "averaged the accuracies of the batches"),
    (evaluate_not_implemented, "not implemented yet"),
    (evaluate_argmax_without_dim, ("as many as comparing the labels with argmax() over each whole "
                                   "batch finds (no dim=1")),
    (evaluate_counting_tensors, ("returned a tensor, not a Python float: it read no count into "
                                 "Python (no `.item()`")),
    (evaluate_never_looping, ("After running the model on no batch of the loader (0 forward "
                              "passes), evaluate() raised ZeroDivisionError")),
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


def evaluate_labels_left_on_cpu(model, loader, device):
    model.eval()
    correct = 0
    with torch.inference_mode():
        for features, labels in loader:
            predictions = model(features.to(device)).argmax(dim=1)
            correct += (predictions == labels).sum().item()
    return correct / len(loader.dataset)


def test_evaluate_names_the_line_where_the_labels_met_the_predictions_on_another_device():
    """The stand-in run goes on past the forward pass (it stopped there once, and labels left on
    the CPU passed): the message names the operation and the learner's line."""
    message = failure(checks.check_evaluate_accuracy, evaluate_labels_left_on_cpu)
    first = message.splitlines()[0]
    assert "(`correct += (predictions == labels).sum().item()`)" in first
    assert "left on 'cpu'" in first
