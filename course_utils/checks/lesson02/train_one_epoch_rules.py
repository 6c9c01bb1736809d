"""train_one_epoch's rules on what it returned: a Python float, the mean of the batch
losses (or the message that names the number it returned instead)."""
from __future__ import annotations

import math

from ..framework import expect_close, fail


def verify_returned_float(cpu: dict) -> None:
    """A Python float, or the message that names what came back instead."""
    if cpu["returned"]["type"] == "Tensor":
        if cpu["returned"]["has_grad_fn"]:
            fail("train_one_epoch() returned a tensor that still carries an autograd graph: the "
                 "losses were added up as tensors (`total += loss`), which keeps every batch's "
                 "graph nodes alive in host memory and makes the result a tensor.",
                 "add `loss.item()` (a Python float) to your running total instead of `loss`.")
        fail("train_one_epoch() returned a tensor, not a Python float.",
             "add up `loss.item()` values (or call `.item()` on the total) and return a float.")
    if cpu["value"] is None:
        fail(f"train_one_epoch() returned {cpu['returned']['type']!r}, not a Python float.",
             "return the mean loss: the sum of `loss.item()` divided by the number of batches.")


def verify_mean_loss(losses: list[float], value: float, hidden: bool) -> None:
    """The returned value against the mean of the reference's batch losses."""
    mean = sum(losses) / len(losses)
    if math.isclose(value, losses[-1], rel_tol=1e-5) and not math.isclose(value, mean,
                                                                          rel_tol=1e-5):
        fail("train_one_epoch() returned the loss of the last batch only.",
             "add up `loss.item()` over all batches and divide by the number of batches.")
    if math.isclose(value, sum(losses), rel_tol=1e-5):
        fail("train_one_epoch() returned the sum of the batch losses, not their mean.",
             "divide the total by the number of batches, `len(loader)`.")
    expect_close(value, mean, "The returned mean loss", "return the sum of `loss.item()` over "
                 "the batches divided by the number of batches.", rel=1e-5, reveal=not hidden)
