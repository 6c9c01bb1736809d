"""DeviceBatches(features, labels, batch_size, seed, drop_last): shuffled batches cut on the device."""
from __future__ import annotations

import random
from dataclasses import dataclass

from ..framework import case, check, expect_no_error, fail
from ..probe_support import run_learner


def make_inputs(seed: int, hidden: bool) -> dict:
    if not hidden:
        return {"configs": [{"n": 10, "batch_size": 4, "seeds": [0, 1]}]}
    rng = random.Random(seed)
    size = rng.randint(3, 7)
    exact, uneven = size * rng.randint(3, 5), size * rng.randint(3, 5) + rng.randint(1, size - 1)
    return {"configs": [{"n": n, "batch_size": size, "seeds": rng.sample(range(1000), 2)}
                        for n in (uneven, exact)]}


def probe(DeviceBatches, inputs):
    """Iterate DeviceBatches over index-coded CPU data, then over meta data; report the batches."""
    import torch
    from torch.overrides import TorchFunctionMode

    def summary(item):  # one yielded batch, as plain facts
        if not (isinstance(item, (tuple, list)) and len(item) == 2
                and all(isinstance(part, torch.Tensor) for part in item)):
            return {"bad": type(item).__name__}
        x, y = item
        if x.device.type != "cpu" or y.device.type != "cpu":  # moved: its values are not read
            return {"bad": f"tensors on {x.device} and {y.device}"}
        return {"labels": y.tolist(),
                "paired": x.shape[:1] == y.shape and torch.equal(x[:, 0].long(), y)}

    def epochs(batches, count, disturb_from=None):
        out = []
        for epoch in range(count):
            if disturb_from is not None and epoch >= disturb_from:
                torch.rand(7)  # other code draws from PyTorch's global generator
            out.append([summary(item) for item in batches])
        return out

    class CountSingleExamples(TorchFunctionMode):  # data[i]: one example taken out at a time
        count = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            source = args[0] if args else None
            if isinstance(source, torch.Tensor) and isinstance(out, torch.Tensor) and \
                    source.device.type == "meta" and out.ndim < source.ndim:
                self.count += 1
            return out

    def observe(config):
        n, size, (seed, other) = config["n"], config["batch_size"], config["seeds"]
        y = torch.arange(n)
        x = y.float().repeat_interleave(3).reshape(n, 3)

        def make(seed=seed, **options):
            return DeviceBatches(x, y, size, seed=seed, **options)

        def meta_run():
            data = torch.empty(n, 3, device="meta"), torch.empty(n, dtype=torch.long, device="meta")
            with CountSingleExamples() as counter:
                batches = list(DeviceBatches(*data, size, seed=seed))
            devices = {str(p.device) for item in batches for p in item if isinstance(p, torch.Tensor)}
            return {"devices": sorted(devices), "single": counter.count}

        tasks = {"a": lambda: epochs(make(), 3), "b": lambda: epochs(make(), 2, disturb_from=1),
                 "c": lambda: epochs(make(other), 1),
                 "drop": lambda: epochs(make(drop_last=True), 1),
                 "len": lambda: [len(make()), len(make(drop_last=True))], "meta": meta_run}
        runs = {name: run_learner(task) for name, task in tasks.items()}
        return {name: {"value": run.value, "error": run.error} for name, run in runs.items()}

    return [observe(config) for config in inputs["configs"]]


def _success(inputs: dict) -> str:
    tested = "; ".join(f"n={c['n']}, batch_size={c['batch_size']}" for c in inputs["configs"])
    return ("DeviceBatches yields every example once per epoch with its label, keeps the last "
            "smaller batch unless drop_last=True, has the right len(), shuffles with its own "
            "seeded generator in a new order each epoch, and leaves the batches on the data's "
            f"device (the CPU and meta), cut with one indexing per batch: tested with {tested}.")


def _sizes(n: int, size: int, drop_last: bool) -> list[int]:
    return [size] * (n // size) + ([] if drop_last or n % size == 0 else [n % size])


def _orders(epochs: list[list[dict]]) -> list[list[int]]:
    return [[label for batch in epoch for label in batch["labels"]] for epoch in epochs]


@dataclass(frozen=True)
class _Run:
    """One configuration's observations, with the order of labels in each epoch."""

    where: str
    n: int
    size: int
    seen: dict
    orders: list


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_device_batches(inputs, observations, hidden):
    runs = []
    for config, seen in zip(inputs["configs"], observations, strict=True):
        n, size = config["n"], config["batch_size"]
        where = f"With n={n} examples and batch_size={size}"
        expect_no_error(seen["a"]["error"], "DeviceBatches", where=where)
        bad = [batch["bad"] for epoch in seen["a"]["value"] for batch in epoch if "bad" in batch]
        if bad:
            fail(f"{where}, DeviceBatches yielded {bad[0]}, from data on the CPU.",
                 "yield pairs (features[index], labels[index]) of tensors, left where the data "
                 "are: do not move them to another device.")
        runs.append(_Run(where, n, size, seen, _orders(seen["a"]["value"])))
    with case("no example twice in an epoch, each with its own label"):
        for run in runs:
            if not all(batch["paired"] for epoch in run.seen["a"]["value"] for batch in epoch):
                fail(f"{run.where}, a batch's features do not belong to its labels: they were "
                     "shuffled with different orders.",
                     "index both with the same positions: features[index], labels[index].")
            if any(len(set(order)) < len(order) for order in run.orders):
                fail(f"{run.where}, an epoch yielded some examples twice.", "draw one permutation "
                     "of range(n) per epoch (torch.randperm) and cut it into consecutive slices.")
    with case("every example in every epoch: the last, smaller batch is kept"):
        for run in runs:
            if any(sorted(order) != list(range(run.n)) for order in run.orders):
                dropped = len(run.orders[0]) == run.n - run.n % run.size
                fail(f"{run.where}, an epoch yielded {len(run.orders[0])} of the {run.n} examples"
                     + (": the last, smaller batch was dropped." if dropped else "."),
                     "loop over range(0, n, batch_size): the last slice is shorter, and kept.")
    with case("drop_last=True drops only the last, smaller batch"):
        for run in runs:
            expect_no_error(run.seen["drop"]["error"], "DeviceBatches(..., drop_last=True)",
                            where=run.where)
            sizes = [len(batch.get("labels", ())) for batch in run.seen["drop"]["value"][0]]
            if sizes != _sizes(run.n, run.size, True):
                kept = sizes == _sizes(run.n, run.size, False)
                fail(f"{run.where} and drop_last=True, the batches had the sizes {sizes}"
                     + (": the last, smaller batch was still there." if kept else "."),
                     "with drop_last=True, stop before the last slice when it is shorter.")
    with case("len() is the number of batches, with and without drop_last"):
        for run in runs:
            expect_no_error(run.seen["len"]["error"], "len(DeviceBatches(...))", where=run.where,
                            hints={"TypeError": "define __len__(self), returning the number of "
                                   "batches per epoch."})
            for drop, length in zip((False, True), run.seen["len"]["value"], strict=True):
                if length != len(_sizes(run.n, run.size, drop)):
                    fail(f"{run.where} and drop_last={drop}, len() is {length!r}, but an epoch "
                         f"has {len(_sizes(run.n, run.size, drop))} batches.",
                         "return ceil(n / batch_size), or n // batch_size with drop_last.")
    with case("the same seed gives the same order, another seed another one"):
        for run in runs:
            expect_no_error(run.seen["b"]["error"] or run.seen["c"]["error"], "DeviceBatches",
                            where=run.where)
            again, other = _orders(run.seen["b"]["value"]), _orders(run.seen["c"]["value"])
            if again[0] != run.orders[0]:
                fail(f"{run.where}, two DeviceBatches with the same seed gave different orders.",
                     "seed a generator of your own: torch.Generator().manual_seed(seed).")
            if again[1] != run.orders[1]:
                fail(f"{run.where}, the order changed when other code drew random numbers: it "
                     "comes from PyTorch's global generator, which all code shares.",
                     "draw from a generator of your own: torch.randperm(n, generator=...).")
            if other[0] == run.orders[0]:
                fail(f"{run.where}, two different seeds gave the same order.",
                     "seed the generator with the `seed` argument.")
    with case("a new order every epoch"):
        for run in runs:
            unshuffled = run.orders[0] == list(range(run.n))
            if unshuffled or len({tuple(order) for order in run.orders}) < 3:
                fail(f"{run.where}, " + ("the batches come in the data's order." if unshuffled
                                         else "the order repeats from epoch to epoch: the "
                                         "generator is created (seeded) again at each epoch."),
                     "create the generator once, in __init__, and draw a new permutation from "
                     "it in each __iter__.")
    with case("the batches stay on the data's device, cut with one indexing per batch"):
        for run in runs:
            meta, error = run.seen["meta"]["value"], run.seen["meta"]["error"]
            if error is not None:
                fail(f"{run.where}, on the meta device (a stand-in for a GPU), DeviceBatches "
                     f"raised {error['type']}: it copies the data to the host (.cpu(), "
                     ".tolist(), .numpy(), .item() or .to(another device)).",
                     "leave the data where they are: index them with a tensor of positions.")
            if meta["devices"] != ["meta"]:
                fail(f"{run.where}, the batches of data on the meta device came out on "
                     f"{meta['devices']}.", "leave the data where they are.")
            if meta["single"]:
                fail(f"{run.where}, DeviceBatches builds each batch one example at a time, the "
                     "per-example work that makes a DataLoader over a TensorDataset slow.",
                     "index once per batch with a tensor of positions: features[index].")
