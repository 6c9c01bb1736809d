"""What the tests of lesson 01's exercises share."""
from __future__ import annotations

import torch

from ...solutions import solution

to_device = solution("01_tensors_devices", "to_device")
predict = solution("01_tensors_devices", "predict")
ON_GPU = solution("01_tensors_devices", "on_gpu")


def to_device_no_dicts(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, list):
        return [to_device_no_dicts(item, device) for item in obj]
    if isinstance(obj, tuple):
        return tuple(to_device_no_dicts(item, device) for item in obj)
    return obj


def to_device_moves_everything(obj, device):
    if isinstance(obj, dict):
        return {key: to_device_moves_everything(value, device) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device_moves_everything(item, device) for item in obj)
    return obj.to(device)


def to_device_in_place(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        for key in obj:
            obj[key] = to_device_in_place(obj[key], device)
        return obj
    if isinstance(obj, list):
        for index, item in enumerate(obj):
            obj[index] = to_device_in_place(item, device)
        return obj
    if isinstance(obj, tuple):
        return tuple(to_device_in_place(item, device) for item in obj)
    return obj


def predict_unassigned(model, inputs):
    inputs.to(next(model.parameters()).device)
    with torch.no_grad():
        return model(inputs).cpu()


def predict_moves_model(model, inputs):
    model.to(inputs.device)
    with torch.no_grad():
        return model(inputs).cpu()


def predict_stays_on_device(model, inputs):
    inputs = inputs.to(next(model.parameters()).device)
    with torch.no_grad():
        return model(inputs)


# ------------------------------------------------------------------ on_gpu

def with_answers(**changes):
    return dict(ON_GPU, **changes)
