"""DeviceBatches(features, labels, batch_size, seed, drop_last): shuffled batches cut on the
device."""
from __future__ import annotations

import random
from typing import Any, TypedDict

from ...probe import ErrorFacts, meta_generators, meta_recorder, patched, run_learner
from ..framework import case, check, expect_no_error, fail
from . import device_batches_rules as rules


class Task(TypedDict):
    value: Any  # epochs of batches ({"labels", "paired"} or a type's name), or the lengths
    error: ErrorFacts | None  # what the learner's code raised, if it did


class MetaRun(TypedDict):
    devices: list[str]  # the devices of the tensors yielded from meta data
    single: int  # results with fewer dimensions than their input: one example at a time
    host: list[str]  # the first host reads of device values ('.cpu()', '.item()', ...)
    error: ErrorFacts | None
    mixed: list[Any]  # the first call that mixed meta and host operands: operation, line


class MetaTask(TypedDict):
    value: MetaRun | None
    error: ErrorFacts | None  # the probe's meta run itself failed


class Config(TypedDict):
    three_epochs: Task  # three epochs of one object
    disturbed: Task  # two epochs, the global generator drawn from between them
    other_seed: Task  # one epoch of an object built with another seed
    drop: Task  # one epoch with drop_last=True
    len: Task  # [len() without, len() with drop_last]
    meta: MetaTask  # an epoch over meta data (a GPU's stand-in)


def make_inputs(seed: int, hidden: bool) -> dict:
    if not hidden:
        return {"configs": [{"n": 10, "batch_size": 4, "seeds": [0, 1]}]}
    rng = random.Random(seed)
    size = rng.randint(3, 7)  # every remainder's kind on every seed: one, more, none
    last_of_one, uneven = size * rng.randint(3, 5) + 1, size * rng.randint(3, 5) + rng.randint(
        2, size - 1)
    return {"configs": [{"n": n, "batch_size": size, "seeds": rng.sample(range(1000), 2)}
                        for n in (last_of_one, uneven, size * rng.randint(3, 5))]}


def probe(DeviceBatches, inputs):
    """Iterate DeviceBatches over index-coded CPU data, then over meta data; report the batches."""
    import torch

    def labels_of(item):  # a batch's labels, or what is wrong with it
        if not (isinstance(item, (tuple, list)) and len(item) == 2
                and all(isinstance(part, torch.Tensor) for part in item)):
            return type(item).__name__
        x, y = item
        if x.device.type != "cpu" or y.device.type != "cpu":  # moved: its values are not read
            return f"tensors on {x.device} and {y.device}"
        paired = x.shape[:1] == y.shape and torch.equal(x[:, 0].long(), y)
        return {"labels": y.tolist(), "paired": paired}

    def epochs(batches, count, disturb_from=99):
        out = []
        for epoch in range(count):
            if epoch >= disturb_from:
                torch.rand(7)  # other code draws from PyTorch's global generator
            out.append([labels_of(item) for item in batches])
        return out

    def observe(config):
        n, size, (seed, other) = config["n"], config["batch_size"], config["seeds"]
        y = torch.arange(n)
        x = y.float().repeat_interleave(3).reshape(n, 3)

        def make(seed=seed, **options):
            return DeviceBatches(x, y, size, seed=seed, **options)

        def on_meta():
            data = torch.empty(n, 3, device="meta"), torch.empty(n, dtype=torch.long, device="meta")
            with patched(meta_generators()), meta_recorder() as recorder:
                run = run_learner(lambda: list(DeviceBatches(*data, size, seed=seed)))
            return {"devices": sorted({str(part.device) for item in run.value or []
                                       for part in item if isinstance(part, torch.Tensor)}),
                    "single": recorder.single, "host": recorder.host[:3], "error": run.error,
                    "mixed": recorder.mixed[:1]}

        tasks = {"three_epochs": lambda: epochs(make(), 3),
                 "disturbed": lambda: epochs(make(), 2, disturb_from=1),
                 "other_seed": lambda: epochs(make(other), 1),
                 "drop": lambda: epochs(make(drop_last=True), 1),
                 "len": lambda: [len(make()), len(make(drop_last=True))], "meta": on_meta}
        runs = {name: run_learner(task) for name, task in tasks.items()}
        return {name: {"value": run.value, "error": run.error} for name, run in runs.items()}

    return [observe(config) for config in inputs["configs"]]


def _success(inputs: dict) -> str:
    tested = "; ".join(f"n={c['n']}, batch_size={c['batch_size']}" for c in inputs["configs"])
    return ("DeviceBatches yields every example once per epoch with its label, keeps the last "
            "smaller batch unless drop_last=True, has the right len(), shuffles with a seeded "
            "generator of its own in a new order each epoch, and cuts each batch with one "
            f"indexing on the data's device (the CPU, meta): tested with {tested}.")


@check(success=_success, make_inputs=make_inputs, probe=probe, observes=list[Config])
def check_device_batches(inputs, observations, hidden):
    runs = []  # (where, n, batch size, observations)
    for config, seen in zip(inputs["configs"], observations, strict=True):
        where = f"With n={config['n']} examples and batch_size={config['batch_size']}"
        expect_no_error(seen["three_epochs"]["error"], "DeviceBatches", where=where)
        for problem in (b for e in seen["three_epochs"]["value"] for b in e if isinstance(b, str)):
            fail(f"{where}, DeviceBatches yielded {problem}, from data on the CPU.",
                 "yield pairs (features[index], labels[index]) of tensors, left where the data "
                 "are: do not move them to another device.")
        runs.append((where, config["n"], config["batch_size"], seen))
    with case("every example once per epoch, with its label, the last smaller batch kept"):
        rules.expect_every_example_once(runs)
    with case("drop_last=True drops only the last, smaller batch; len() counts the batches"):
        rules.expect_drop_last_and_len(runs, hidden)
    with case("shuffled by its own generator: seeded, in a new order every epoch"):
        rules.expect_shuffled(runs)
    with case("the batches stay on the data's device, cut with one indexing per batch"):
        rules.expect_on_the_data_device(runs)
