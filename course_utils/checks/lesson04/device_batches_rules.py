"""DeviceBatches' verdict: one rule function per case, kept apart from the inputs and the probe.

Each takes ``runs``: (where, n, batch size, observations) per configuration tried.
"""
from __future__ import annotations

from ..framework import error_summary, expect_no_error, fail, where_in_code


def _sizes(n: int, size: int, drop_last: bool) -> list[int]:
    return [size] * (n // size) + ([] if drop_last or n % size == 0 else [n % size])


def _orders(epochs: list[list]) -> list[list[int]]:
    return [[label for batch in epoch for label in batch["labels"]] for epoch in epochs]


def expect_every_example_once(runs: list) -> None:
    for where, n, size, seen in runs:
        if not all(batch["paired"] for epoch in seen["three_epochs"]["value"] for batch in epoch):
            fail(f"{where}, a batch's features do not belong to its labels.",
                 "index both with the same positions: features[index], labels[index].")
        for order in _orders(seen["three_epochs"]["value"]):
            if len(set(order)) < len(order):
                fail(f"{where}, an epoch yielded some examples twice.", "draw one "
                     "permutation of range(n) per epoch and cut it into consecutive slices.")
            if len(order) < n:
                fail(f"{where}, an epoch yielded {len(order)} of the {n} examples" + (
                     ": the last, smaller batch was dropped." if len(order) == n - n % size
                     else "."), "loop over range(0, n, batch_size): keep the last slice.")


def expect_drop_last_and_len(runs: list, hidden: bool) -> None:
    for where, n, size, seen in runs:
        for key, what in (("drop", "DeviceBatches(..., drop_last=True)"),
                          ("len", "len(DeviceBatches(...))")):
            expect_no_error(seen[key]["error"], what, where=where, hints={"TypeError": (
                "accept the argument drop_last=False and define __len__(self).")})
        sizes = [len(batch["labels"]) for batch in seen["drop"]["value"][0]]
        if sizes != _sizes(n, size, True):
            kept = sizes == _sizes(n, size, False)
            fail(f"{where} and drop_last=True, the batches had the sizes {sizes}"
                 + (": the last, smaller batch was still there." if kept else "."),
                 "with drop_last=True, stop before the last slice when it is shorter.")
        for drop, length in zip((False, True), seen["len"]["value"], strict=True):
            batches = len(_sizes(n, size, drop))
            if length != batches:
                has = "" if hidden else f", but an epoch has {batches} batches"
                fail(f"{where} and drop_last={drop}, len() is {length!r}{has}.",
                     "return ceil(n / batch_size), or n // batch_size with drop_last.")


def _order_problem(n: int, seen: dict) -> str | None:
    """What is wrong with the epochs' orders, as observed (causes named only where known)."""
    orders, again = _orders(seen["three_epochs"]["value"]), _orders(seen["disturbed"]["value"])
    if orders[0] == list(range(n)):
        return "the batches come in the data's order"
    if again[0] != orders[0]:
        return "the same seed gave different orders"
    if again[1] != orders[1]:
        return "the order changed when other code drew from PyTorch's global generator"
    if len({tuple(order) for order in orders}) < 3:
        return ("an epoch repeated an earlier epoch's order (as a generator seeded again at "
                "each epoch, or an order drawn once in __init__, does)")
    if _orders(seen["other_seed"]["value"])[0] == orders[0]:
        return "two different seeds gave the same order"
    return None


def expect_shuffled(runs: list) -> None:
    for where, n, _, seen in runs:
        expect_no_error(seen["disturbed"]["error"] or seen["other_seed"]["error"],
                        "DeviceBatches", where=where)
        problem = _order_problem(n, seen)
        if problem:
            fail(f"{where}, {problem}.", "create a generator of your own once, in "
                 "__init__: torch.Generator().manual_seed(seed); draw each epoch's order "
                 "from it in __iter__: torch.randperm(n, generator=self.generator).")


def expect_on_the_data_device(runs: list) -> None:
    for where, _, _, seen in runs:
        meta = seen["meta"]["value"]
        stand_in = f"{where}, on the meta device (a stand-in for a GPU), DeviceBatches"
        if meta["host"]:  # seen, whether or not it then raised
            fail(f"{stand_in} copies data to the host with `{meta['host'][0]}`: on a GPU each "
                 "such copy waits for the device and crosses the bus.",
                 "leave the data where they are: index them with a tensor of positions, "
                 "features[index], without .cpu(), .tolist(), .item() or .numpy().")
        if meta["error"] is not None:
            fail(f"{stand_in} raised {error_summary(meta['error'])}"
                 f"{where_in_code(meta['error'])}: on a GPU it would fail too.",
                 "make what you index with on the data's device, or on the CPU and move it: "
                 "torch.randperm(n, generator=self.generator).to(features.device); a "
                 "generator must live where randperm draws.")
        for mixed in meta["mixed"]:
            line = mixed["line"]
            at = f" at line {line['lineno']} of {line['function']} (`{line['text']}`)" \
                if line else ""
            fail(f"{stand_in} cut a batch out of the data with positions on the CPU"
                 f"{at}: on a GPU {mixed['operation']} first copies those positions to the "
                 "device, one host-to-device copy per batch.",
                 "move the epoch's order to the data's device once, when you draw it: "
                 "torch.randperm(n, generator=self.generator).to(self.features.device).")
        if meta["devices"] != ["meta"]:
            fail(f"{stand_in} yielded batches on {meta['devices']}.",
                 "leave the data where they are: index them with a tensor of positions.")
        if meta["single"]:
            fail(f"{where}, DeviceBatches builds each batch one example at a time, the "
                 "per-example work that makes a DataLoader over a TensorDataset slow.",
                 "index once per batch with a tensor of positions: features[index].")
