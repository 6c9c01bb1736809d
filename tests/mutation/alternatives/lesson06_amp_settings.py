"""Right alternatives: copied from tests/test_checks_lesson06.py, and own."""
from __future__ import annotations

import torch

from course_utils import precision

from ...solutions import solution

amp_settings = solution("06_mixed_precision", "amp_settings")


def settings_by_capability(device):
    """Right: the compute capability instead of is_bf16_supported."""
    old_gpu = device.type == "cuda" and torch.cuda.get_device_capability(device) < (8, 0)
    dtype = torch.float16 if old_gpu else torch.bfloat16
    return dtype, torch.amp.GradScaler(device.type, enabled=old_gpu)


def settings_with_course_utils(device):
    """Right: the course's policy (float16 with a scaler on a Mac it cannot verify)."""
    policy = precision.amp_policy(device)
    return policy.dtype, policy.make_scaler()


def settings_asks_macos(device):
    """Right: bfloat16 on MPS only on macOS 14+, else float16 with a scaler."""
    if device.type == "mps" and not torch.backends.mps.is_macos_or_newer(14, 0):
        return torch.float16, torch.amp.GradScaler("mps")
    return amp_settings(device)


def settings_in_the_device_context(device):
    """Right: is_bf16_supported asked with `device` made current for the question."""
    if device.type != "cuda":
        return torch.bfloat16, torch.amp.GradScaler(device.type, enabled=False)
    with torch.cuda.device(device):
        native = torch.cuda.is_bf16_supported(including_emulation=False)
    dtype = torch.bfloat16 if native else torch.float16
    return dtype, torch.amp.GradScaler("cuda", enabled=not native)


def settings_by_properties(device):
    """Right: the device's properties, a match statement, and a scaler made in one place."""
    match device.type:
        case "cuda" if torch.cuda.get_device_properties(device).major < 8:
            dtype = torch.float16
        case _:
            dtype = torch.bfloat16
    use_scaler = dtype is torch.float16
    return dtype, torch.amp.GradScaler(device=device.type, enabled=use_scaler)


ALTERNATIVES = [settings_by_capability, settings_with_course_utils, settings_asks_macos,
                settings_in_the_device_context, settings_by_properties]
