"""Right alternatives: imported from tests/checks/lesson00/test_pick_device.py, and own."""
from __future__ import annotations

import torch

from ...checks.lesson00.test_pick_device import (
    pick_device_asks_is_built_too,
    pick_device_current_cuda_device,
    pick_device_with_accelerator_api,
    pick_device_with_course_utils,
)


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
