"""Checks for lesson 02, "A training loop on the device", and what they share."""
from __future__ import annotations

from typing import TypedDict

from ...probe import LineFacts
from ..framework import fail


class StandInStop(TypedDict):
    """Where probe.meta_stand_in() ended the learner's code on the GPU's stand-in."""

    why: str  # "mixed": device and host operands met; "read": a device value was read
    operation: str  # the torch function's name, e.g. '__eq__'
    devices: list[str]  # the device types of its operands
    line: LineFacts | None  # the learner's line that made the call


def expect_batches_moved(meta: dict, what: str) -> None:
    """The model is on 'meta' (the device passed in): each batch must arrive there."""
    arrived = meta["forwards"][0]["input_device"] if meta["forwards"] else None
    if arrived is None:
        fail(f"{what} never called the model on a batch from the loader.",
             "loop `for features, labels in loader:` and call `model(features)` in the loop.")
    if arrived == "meta":
        return
    where = (f"A batch reached the model on {arrived!r} while the model is on the device passed "
             "in ('meta' in this check, a stand-in for a GPU)")
    if "meta" in meta["moves"]:
        fail(f"{where}: `.to(device)` was called, but its result was thrown away.",
             "`.to()` returns a new tensor and leaves the original where it was: assign it, "
             "`features, labels = features.to(device), labels.to(device)`.")
    if meta["moves"]:
        fail(f"{where}: the batch was moved to {meta['moves'][-1]!r}, not to `device`.",
             "move each batch with the `device` argument (not a global variable): "
             "`features.to(device)`.")
    fail(f"{where}: the data were not moved to the model's device. On a GPU this raises "
         "'Expected all tensors to be on the same device'.",
         "inside the loop, write `features, labels = features.to(device), labels.to(device)`.")


def expect_one_device(stopped: StandInStop | None, what: str) -> None:
    """After the batch reached the model on 'meta': no operation mixed it with host data."""
    if not stopped or stopped["why"] != "mixed":
        return
    line = stopped["line"]
    where = f"line {line['lineno']} of {line['function']} (`{line['text']}`)" if line else what
    fail(f"At {where}, {stopped['operation']} combined a tensor on the device ('meta' in this "
         "check, a stand-in for a GPU) with one left on 'cpu' (the labels were not moved, or "
         "were copied back): on a GPU this raises 'Expected all tensors to be on the same "
         "device'.",
         "move the labels with the features, `features, labels = features.to(device), "
         "labels.to(device)`, and compare the predictions with them on the device.")
