"""Right alternatives: imported from the check's tests
(tests/checks/lesson02/test_checkpoint_round_trip.py), and own."""
from __future__ import annotations

import torch

from ...checks.lesson02.test_checkpoint_round_trip import load_checkpoint_via_cpu, save_checkpoint


def save_with_a_file(model, optimizer, epoch, path):
    """Own: an open file, keyword names for the parts."""
    state = dict(model=model.state_dict(), optimizer=optimizer.state_dict(), epoch=epoch)  # noqa: C408
    with open(path, "wb") as file:
        torch.save(state, file)


def load_with_a_file(path, model, optimizer, device):
    """Own: move first, then load from an open file straight onto the device."""
    model.to(device)
    with open(path, "rb") as file:
        checkpoint = torch.load(file, map_location=device, weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    return int(checkpoint["epoch"])


def load_with_device_string(path, model, optimizer, device):
    """Own: map_location as a string, strict loading, the model moved before the optimizer."""
    checkpoint = torch.load(str(path), map_location=str(device), weights_only=True)
    model.load_state_dict(checkpoint["model"], strict=True)
    model = model.to(device)
    optimizer.load_state_dict(checkpoint["optimizer"])
    return checkpoint["epoch"]


def save_in_pieces(model, optimizer, epoch, path):
    """Own: the dict built up entry by entry."""
    checkpoint = {}
    checkpoint["epoch"] = epoch
    checkpoint["model"] = model.state_dict()
    checkpoint["optimizer"] = optimizer.state_dict()
    torch.save(checkpoint, path)


ALTERNATIVES = [(save_checkpoint, load_checkpoint_via_cpu), (save_with_a_file, load_with_a_file),
                (save_checkpoint, load_with_device_string), (save_in_pieces, load_with_a_file),
                (save_with_a_file, load_checkpoint_via_cpu)]
