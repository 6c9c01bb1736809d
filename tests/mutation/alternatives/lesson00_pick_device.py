"""Right alternatives: copied from the lesson's tests/test_checks_lessonNN.py, and own."""
from __future__ import annotations

import torch

from course_utils import get_device


def pick_device_with_accelerator_api():
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    return torch.device("cpu") if accelerator is None else torch.device(accelerator.type)


def pick_device_with_course_utils():
    return get_device()


def pick_device_asks_is_built_too():
    """Right: MPS needs both a build with MPS and a machine with it."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_built() and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def pick_device_current_cuda_device():
    """Right: the current CUDA device, by index."""
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def pick_device_elif_chain():
    """Own: one if/elif/else chain and device strings."""
    if torch.cuda.is_available():
        name = "cuda"
    elif torch.backends.mps.is_available():
        name = "mps"
    else:
        name = "cpu"
    return torch.device(name)


def pick_device_first_available():
    """Own: the preference as data, the first available wins."""
    preference = [("cuda", torch.cuda.is_available), ("mps", torch.backends.mps.is_available)]
    for name, available in preference:
        if available():
            return torch.device(name)
    return torch.device("cpu")


ALTERNATIVES = [pick_device_with_accelerator_api, pick_device_with_course_utils,
                pick_device_asks_is_built_too, pick_device_current_cuda_device,
                pick_device_elif_chain, pick_device_first_available]
