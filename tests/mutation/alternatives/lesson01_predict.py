"""Right alternatives: imported from tests/checks/lesson01/test_predict.py, and own."""
from __future__ import annotations

import torch

from ...checks.lesson01.test_predict import predict_detach


def predict_inference_mode(model, inputs):
    """Own: inference_mode, the device of the first buffer or parameter via model.parameters()."""
    device = next(iter(model.parameters())).device
    with torch.inference_mode():
        return model(inputs.to(device=device)).to("cpu")


def predict_decorated(model, inputs):
    """Own: torch.no_grad() as a decorator of an inner function."""
    @torch.no_grad()
    def run(x):
        return model(x)
    parameter = next(model.parameters())
    return run(inputs.to(parameter.device)).cpu()


def predict_state_dict_device(model, inputs):
    """Own: the device read from the state dict's first tensor."""
    device = next(iter(model.state_dict().values())).device
    with torch.no_grad():
        outputs = model(inputs.to(device))
    return outputs.detach().cpu()


def predict_set_grad_enabled(model, inputs):
    """Own: set_grad_enabled(False), .to(torch.device('cpu'))."""
    inputs = inputs.to(next(model.parameters()).device)
    with torch.set_grad_enabled(False):
        outputs = model(inputs)
    return outputs.to(torch.device("cpu"))


ALTERNATIVES = [predict_detach, predict_inference_mode, predict_decorated,
                predict_state_dict_device, predict_set_grad_enabled]
