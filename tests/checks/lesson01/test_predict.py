"""Tests of the check course_utils/checks/lesson01/predict.py."""
from __future__ import annotations

import pytest
import torch

from course_utils import checks, get_device

from ...probe_roundtrip import HIDDEN_SEEDS, failure, passes
from .shared import predict, predict_moves_model, predict_stays_on_device, predict_unassigned

# ------------------------------------------------------------------ predict

def predict_detach(model, inputs):
    """Another right answer: detach instead of no_grad, .to('cpu') instead of .cpu()."""
    device = next(model.parameters()).device
    return model(inputs.to(device)).detach().to("cpu")


def predict_as_given(model, inputs):  # the broken snippet of the lesson, verbatim
    device = get_device()
    inputs.to(device)
    return model(inputs)


def predict_own_device(model, inputs):
    inputs = inputs.to(get_device())
    with torch.no_grad():
        return model(inputs).cpu()


def predict_no_move(model, inputs):
    with torch.no_grad():
        return model(inputs).cpu()


def predict_with_grad(model, inputs):
    inputs = inputs.to(next(model.parameters()).device)
    return model(inputs).cpu()


def predict_numpy(model, inputs):
    return predict(model, inputs).numpy()


def predict_weight(model, inputs):
    inputs = inputs.to(model.weight.device)
    with torch.no_grad():
        return model(inputs).cpu()


def predict_cuda(model, inputs):
    with torch.no_grad():
        return model.cuda()(inputs.cuda()).cpu()


def predict_softmax(model, inputs):
    return predict(model, inputs).softmax(dim=-1)


def predict_not_done(model, inputs):
    raise NotImplementedError()


@pytest.mark.parametrize("answer", [predict, predict_detach])
def test_predict_correct(answer, capsys):
    passes(checks.check_predict, answer)
    shown = capsys.readouterr().out
    assert "✔ predict() runs the model on the device its parameters are on" in shown


@pytest.mark.parametrize("answer, expected", [
    (predict_as_given, "with torch.no_grad():"),
    (predict_unassigned, "`inputs.to(device)` returns a new tensor: assign it"),
    (predict_own_device, "ask the model where it lives"),
    (predict_no_move, "predict() did not move them"),
    (predict_moves_model, "predict() moved the model"),
    (predict_stays_on_device, "instead of bringing them back to the CPU"),
    (predict_with_grad, "still attached to the autograd graph"),
    (predict_numpy, "returned a NumPy array, not a tensor"),
    (predict_weight, "not every model has `.weight`"),
    (predict_softmax, "unchanged apart from the move to the CPU"),
    (predict_not_done, "not implemented yet"),
])
def test_predict_mistakes(answer, expected):
    message = failure(checks.check_predict, answer)
    assert expected in message
    assert "How to fix it:" in message


@pytest.mark.skipif(torch.cuda.is_available(), reason="hard-coded CUDA works on a CUDA machine")
def test_predict_hard_coded_cuda():
    message = failure(checks.check_predict, predict_cuda)
    assert "don't name a device in predict()" in message


def test_predict_unassigned_names_the_devices():
    message = failure(checks.check_predict, predict_unassigned)
    assert "model on the 'meta' device" in message and "inputs on 'cpu'" in message


def test_predict_visible_values_are_revealed_hidden_ones_are_not():
    assert "expected about" in failure(checks.check_predict, predict_softmax)
    for seed in HIDDEN_SEEDS:
        message = failure(checks.check_predict, predict_softmax, hidden=True, seed=seed)
        assert "expected about" not in message


def predict_copied_back_without_waiting(model, inputs):
    device = next(model.parameters()).device
    with torch.no_grad():
        return model(inputs.to(device)).to("cpu", non_blocking=True)


def test_predict_copy_back_that_nothing_waits_for_is_named():
    message = failure(checks.check_predict, predict_copied_back_without_waiting)
    assert "copied the outputs to the CPU with non_blocking=True and returned them" in message
