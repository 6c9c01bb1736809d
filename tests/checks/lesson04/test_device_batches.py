"""Tests of the check course_utils/checks/lesson04/device_batches.py."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from course_utils import checks, data

from ...probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from ...solutions import solution

DeviceBatches = solution("04_input_pipeline", "device_batches", "DeviceBatches")


# ------------------------------------------------------------------ DeviceBatches

class WithTensorBatches:
    """Right: the course's TensorBatches does the work."""

    def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
        self.batches = data.TensorBatches(features, labels, batch_size, shuffle=True, seed=seed,
                                          drop_last=drop_last)

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        return iter(self.batches)


class SeededPerEpoch(DeviceBatches):
    """Right: a generator seeded with seed + epoch, as DistributedSampler.set_epoch does."""

    def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
        super().__init__(features, labels, batch_size, seed, drop_last)
        self.seed, self.epoch = seed, 0

    def __iter__(self):
        self.generator = torch.Generator().manual_seed(self.seed + self.epoch)
        self.epoch += 1
        return super().__iter__()


class PythonRandom(DeviceBatches):
    """Right: Python's random.Random, a list of positions as the index."""

    def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
        super().__init__(features, labels, batch_size, seed, drop_last)
        self.rng = random.Random(seed)

    def __iter__(self):
        order = list(range(len(self.labels)))
        self.rng.shuffle(order)
        for start in range(0, len(self) * self.batch_size if self.drop_last else len(order),
                           self.batch_size):
            index = order[start:start + self.batch_size]
            yield self.features[index], self.labels[index]


class NumpyGenerator(PythonRandom):
    """Right: a NumPy generator's permutation as the index."""

    def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
        super().__init__(features, labels, batch_size, seed, drop_last)
        self.rng = np.random.default_rng(seed)

    def __iter__(self):
        order = self.rng.permutation(len(self.labels))
        for start in range(0, len(self) * self.batch_size if self.drop_last else len(order),
                           self.batch_size):
            index = order[start:start + self.batch_size]
            yield self.features[index], self.labels[index]


class DeviceGenerator(DeviceBatches):
    """Right: the generator lives on the data's device (best practice on CUDA)."""

    def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
        super().__init__(features, labels, batch_size, seed, drop_last)
        self.generator = torch.Generator(device=features.device).manual_seed(seed)

    def __iter__(self):
        order = torch.randperm(len(self.labels), generator=self.generator,
                               device=self.features.device)
        stop = len(self) * self.batch_size if self.drop_last else len(order)
        for start in range(0, stop, self.batch_size):
            index = order[start:start + self.batch_size]
            yield self.features[index], self.labels[index]


class WithIndexSelect(DeviceBatches):
    """Right: index_select with the order moved to the data's device once per epoch."""

    def __iter__(self):
        order = torch.randperm(len(self.labels), generator=self.generator)
        order = order.to(self.features.device)
        for start in starts(self):
            index = order[start:start + self.batch_size]
            yield (torch.index_select(self.features, 0, index),
                   torch.index_select(self.labels, 0, index))


@pytest.mark.parametrize("batches", [DeviceBatches, WithTensorBatches, SeededPerEpoch,
                                     PythonRandom, NumpyGenerator, DeviceGenerator,
                                     WithIndexSelect],
                         ids=lambda c: c.__name__)
def test_device_batches_right_answers_keep_full_marks(batches, capsys):
    passes(checks.check_device_batches, batches)
    assert "tested with n=10, batch_size=4." in capsys.readouterr().out


def with_iter(body):
    """DeviceBatches whose __iter__ is replaced by `body(self)`."""
    return type(body.__name__, (DeviceBatches,), {"__iter__": body})


def starts(self):
    """The start of each batch, as the model answer cuts them (drop_last honoured)."""
    end = len(self) * self.batch_size if self.drop_last else len(self.labels)
    return range(0, end, self.batch_size)


def two_orders(self):
    device, n = self.features.device, len(self.labels)
    features_order = torch.randperm(n, generator=self.generator).to(device)
    labels_order = torch.randperm(n, generator=self.generator).to(device)
    for start in starts(self):
        yield (self.features[features_order[start:start + self.batch_size]],
               self.labels[labels_order[start:start + self.batch_size]])


def with_replacement(self):
    for _ in range(len(self)):
        index = torch.randint(len(self.labels), (self.batch_size,), generator=self.generator)
        yield self.features[index], self.labels[index]


def always_drops_the_last(self):
    order = torch.randperm(len(self.labels), generator=self.generator).to(self.features.device)
    for start in range(0, len(self.labels) - self.batch_size + 1, self.batch_size):
        index = order[start:start + self.batch_size]
        yield self.features[index], self.labels[index]


def ignores_drop_last(self):
    order = torch.randperm(len(self.labels), generator=self.generator).to(self.features.device)
    for start in range(0, len(self.labels), self.batch_size):
        index = order[start:start + self.batch_size]
        yield self.features[index], self.labels[index]


def from_the_global_generator(self):
    order = torch.randperm(len(self.labels))
    for start in range(0, len(self), self.batch_size):
        index = order[start:start + self.batch_size]
        yield self.features[index], self.labels[index]


def seeded_again_each_epoch(self):
    self.generator = torch.Generator().manual_seed(0)
    yield from DeviceBatches.__iter__(self)


def order_drawn_once(self):
    """Wrong, another way to the same symptom: one order, drawn the first time, kept."""
    if not hasattr(self, "order"):
        self.order = torch.randperm(len(self.labels), generator=self.generator).to(
            self.features.device)
    for start in starts(self):
        index = self.order[start:start + self.batch_size]
        yield self.features[index], self.labels[index]


def in_order(self):
    for start in starts(self):
        end = start + self.batch_size
        yield self.features[start:end], self.labels[start:end]


def moved_to_the_host(self):
    for features, labels in DeviceBatches.__iter__(self):
        yield features.cpu(), labels.cpu()


def moved_to_the_notebooks_device(self):  # the notebook's `device`, here a GPU stand-in
    for features, labels in DeviceBatches.__iter__(self):
        yield features.to("meta"), labels.to("meta")


def positions_as_a_list(self):
    """Wrong: the order on the device, brought back as a list for each batch."""
    order = torch.randperm(len(self.labels), generator=self.generator).to(self.features.device)
    for start in starts(self):
        index = order[start:start + self.batch_size].tolist()
        yield self.features[index], self.labels[index]


def randperm_on_the_device_with_a_cpu_generator(self):
    """Wrong on a GPU: randperm draws on the data's device with the CPU generator."""
    order = torch.randperm(len(self.labels), generator=self.generator,
                           device=self.features.device)
    for start in starts(self):
        index = order[start:start + self.batch_size]
        yield self.features[index], self.labels[index]


def one_item_at_a_time(self):
    order = torch.randperm(len(self.labels), generator=self.generator).to(self.features.device)
    for start in starts(self):
        rows = [int(i.item()) for i in order[start:start + self.batch_size]]
        yield self.features[rows], self.labels[rows]


def one_example_at_a_time(self):
    order = torch.randperm(len(self.labels), generator=self.generator)  # 0-dim host positions
    for start in starts(self):
        index = order[start:start + self.batch_size]
        yield (torch.stack([self.features[i] for i in index]),
               torch.stack([self.labels[i] for i in index]))


def as_dicts(self):
    for features, labels in DeviceBatches.__iter__(self):
        yield {"features": features, "labels": labels}


@pytest.mark.parametrize("body, says", [
    (two_orders, "a batch's features do not belong to its labels"),
    (with_replacement, "an epoch yielded some examples twice"),
    (always_drops_the_last, ("an epoch yielded 8 of the 10 examples: the last, smaller batch "
                             "was dropped")),
    (ignores_drop_last, ("drop_last=True, the batches had the sizes [4, 4, 2]: the last, smaller "
                         "batch was still there")),
    (seeded_again_each_epoch, ("an epoch repeated an earlier epoch's order (as a generator "
                               "seeded again at each epoch, or an order drawn once in __init__")),
    (order_drawn_once, "an epoch repeated an earlier epoch's order"),
    (in_order, "the batches come in the data's order"),
    (moved_to_the_host, ("on the meta device (a stand-in for a GPU), DeviceBatches copies "
                         "data to the host with `.cpu()`")),
    (positions_as_a_list, "DeviceBatches copies data to the host with `.tolist()`"),
    (randperm_on_the_device_with_a_cpu_generator, (
        "on the meta device (a stand-in for a GPU), DeviceBatches raised RuntimeError: Expected "
        "a 'cuda' device type for generator but found 'cpu'")),
    (one_item_at_a_time, "DeviceBatches copies data to the host with `.item()`"),
    (one_example_at_a_time, "builds each batch one example at a time"),
], ids=lambda value: getattr(value, "__name__", "says"))
def test_device_batches_mistakes_each_get_their_hint(body, says):
    message = failure(checks.check_device_batches, with_iter(body))
    assert says in message
    assert message.startswith("✘ ") and "How to fix it: " in message


class DeviceGeneratorCpuDraw(DeviceBatches):
    """Wrong on a GPU: a generator on the data's device, but randperm draws on the CPU."""

    def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
        super().__init__(features, labels, batch_size, seed, drop_last)
        self.generator = torch.Generator(device=features.device).manual_seed(seed)


class OrderOnCuda(DeviceBatches):
    """Wrong: the order sent to "cuda" whatever device the data are on."""

    def __iter__(self):
        order = torch.randperm(len(self.labels), generator=self.generator).to("cuda")
        for start in starts(self):
            index = order[start:start + self.batch_size]
            yield self.features[index], self.labels[index]


def test_device_batches_with_a_generator_on_another_device_than_randperm():
    message = failure(checks.check_device_batches, DeviceGeneratorCpuDraw)
    assert "on the meta device (a stand-in for a GPU), DeviceBatches raised RuntimeError: " \
        "Expected a 'cpu' device type for generator but found 'cuda'" in message
    assert "a generator must live where randperm draws" in message
    assert graded(checks.check_device_batches, (DeviceGeneratorCpuDraw,), hidden=True,
                  seed=1).fraction == pytest.approx(3 / 4)


def test_device_batches_sending_the_order_to_cuda():
    message = failure(checks.check_device_batches, OrderOnCuda)
    if torch.cuda.is_available():  # CPU data indexed with a CUDA order: torch refuses
        assert message.startswith("With n=10 examples and batch_size=4, DeviceBatches raised ")
    else:  # the refusal this build gives: a CPU-only one, or a CUDA one without a driver
        try:
            torch.zeros(1).to("cuda")
        except (AssertionError, RuntimeError) as error:
            refusal = f"{type(error).__name__}: {str(error)[:30]}"
        assert message.startswith("With n=10 examples and batch_size=4, DeviceBatches raised "
                                  + refusal), message
        assert '.to("cuda")`' in message


def test_device_batches_from_the_global_generator():
    class GlobalSeeded(DeviceBatches):
        def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
            super().__init__(features, labels, batch_size, seed, drop_last)
            torch.manual_seed(seed)
        __iter__ = from_the_global_generator

    message = failure(checks.check_device_batches, GlobalSeeded)
    assert "the order changed when other code drew from PyTorch's global generator" in message
    assert "torch.randperm(n, generator=self.generator)" in message
    unseeded = failure(checks.check_device_batches, with_iter(from_the_global_generator))
    assert "the same seed gave different orders" in unseeded


def test_device_batches_ignoring_the_seed():
    class FixedSeed(DeviceBatches):
        def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
            super().__init__(features, labels, batch_size, 123, drop_last)

    assert "two different seeds gave the same order" in failure(checks.check_device_batches,
                                                                FixedSeed)


@pytest.mark.parametrize("length, says", [
    (lambda self: len(self.labels) // self.batch_size, ("drop_last=False, len() is 2, but an "
                                                       "epoch has 3 batches")),
    (lambda self: len(self.labels) // self.batch_size + 1, ("drop_last=True, len() is 3, but an "
                                                           "epoch has 2 batches")),
])
def test_device_batches_wrong_length(length, says):
    def batches_without_len(self):
        end = len(self.labels) // self.batch_size * self.batch_size if self.drop_last \
            else len(self.labels)
        order = torch.randperm(len(self.labels), generator=self.generator).to(self.features.device)
        for start in range(0, end, self.batch_size):
            index = order[start:start + self.batch_size]
            yield self.features[index], self.labels[index]

    wrong = type("WrongLength", (DeviceBatches,),
                 {"__len__": length, "__iter__": batches_without_len})
    message = failure(checks.check_device_batches, wrong)
    assert says in message and "return ceil(n / batch_size)" in message
    hidden = failure(checks.check_device_batches, wrong, hidden=True, seed=1)
    assert "len() is" in hidden and "but an epoch has" not in hidden


def test_device_batches_without_len():
    class NoLength:
        def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
            self.inner = DeviceBatches(features, labels, batch_size, seed, drop_last)

        def __iter__(self):
            return iter(self.inner)

    message = failure(checks.check_device_batches, NoLength)
    assert "len(DeviceBatches(...)) raised TypeError" in message
    assert "define __len__(self)" in message
    assert graded(checks.check_device_batches, (NoLength,), hidden=True, seed=1).fraction == \
        pytest.approx(3 / 4)


def test_device_batches_without_drop_last_argument():
    class NoDropLast(DeviceBatches):
        def __init__(self, features, labels, batch_size, seed=0):
            super().__init__(features, labels, batch_size, seed)

    message = failure(checks.check_device_batches, NoDropLast)
    assert "DeviceBatches(..., drop_last=True) raised TypeError" in message


def test_device_batches_moved_to_the_notebooks_device():
    message = failure(checks.check_device_batches, with_iter(moved_to_the_notebooks_device))
    assert "DeviceBatches yielded tensors on meta and meta, from data on the CPU" in message
    assert "do not move them to another device" in message


def test_device_batches_yielding_dicts():
    message = failure(checks.check_device_batches, with_iter(as_dicts))
    assert message.startswith("With n=10 examples and batch_size=4, DeviceBatches yielded dict,")


def test_device_batches_not_implemented():
    class Stub:
        def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
            raise NotImplementedError()

    assert "DeviceBatches is not implemented yet" in failure(checks.check_device_batches, Stub)


@pytest.mark.parametrize("body, share", [(ignores_drop_last, 3 / 4), (in_order, 3 / 4),
                                         (one_example_at_a_time, 3 / 4),
                                         (always_drops_the_last, 3 / 4), (two_orders, 3 / 4)])
def test_device_batches_partial_credit(body, share):
    verdict = graded(checks.check_device_batches, (with_iter(body),), hidden=True, seed=1)
    assert verdict.fraction == pytest.approx(share)


def test_device_batches_hidden_inputs_cover_every_kind_of_last_batch():
    """A last batch of one example, a longer remainder, none: on every seed."""
    for seed in HIDDEN_SEEDS:
        configs = checks.check_device_batches.make_inputs(seed, True)["configs"]
        remainders = [c["n"] % c["batch_size"] for c in configs]
        assert remainders[0] == 1 and remainders[1] > 1 and remainders[2] == 0
        assert all(c["seeds"][0] != c["seeds"][1] for c in configs)


def test_meta_recorder_sees_host_copies_and_single_examples():
    from course_utils.probe import meta_recorder

    data = torch.empty(6, 3, device="meta")
    with meta_recorder() as recorder:
        data[torch.tensor([0, 2])]  # one indexing per batch: neither
        data[1]  # one example
        with pytest.raises(NotImplementedError):
            data.to("cpu")
        torch.zeros(2).tolist()  # CPU tensors are not the device's data
    assert recorder.host == [".to()"] and recorder.single == 1


def test_meta_generators_stand_in_for_a_gpus_and_are_removed():
    from course_utils.probe import meta_generators, patched

    real = (torch.Generator, torch.randperm)
    with patched(meta_generators()):
        on_device = torch.Generator(device="meta").manual_seed(0)
        assert isinstance(on_device, torch.Generator)
        assert torch.randperm(4, generator=on_device, device="meta").device.type == "meta"
        assert torch.randperm(4, generator=torch.Generator().manual_seed(0)).shape == (4,)
        with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator"):
            torch.randperm(4, generator=torch.Generator(), device="meta")
    assert (torch.Generator, torch.randperm) == real


def order_left_on_the_host(self):
    order = torch.randperm(len(self.labels), generator=self.generator)
    for start in starts(self):
        index = order[start:start + self.batch_size]
        yield self.features[index], self.labels[index]


def test_device_batches_names_the_line_that_cuts_with_positions_on_the_host():
    """Indexing device data with host positions works on a GPU too, but copies the positions
    to the device for every batch: the meta run sees the two devices meet and names the line."""
    message = failure(checks.check_device_batches, with_iter(order_left_on_the_host))
    assert "cut a batch out of the data with positions on the CPU at line " in message
    assert "of order_left_on_the_host (`yield self.features[index], self.labels[index]`)" \
        in message

