"""Right alternatives: copied from tests/test_checks_lesson04.py, and own."""
from __future__ import annotations

import random

import numpy as np
import torch

from course_utils import data

from ...solutions import solution

DeviceBatches = solution("04_input_pipeline", "device_batches", "DeviceBatches")


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


def starts(self):
    """The start of each batch, as the model answer cuts them (drop_last honoured)."""
    end = len(self) * self.batch_size if self.drop_last else len(self.labels)
    return range(0, end, self.batch_size)


ALTERNATIVES = [WithTensorBatches, SeededPerEpoch, PythonRandom, NumpyGenerator, DeviceGenerator,
                WithIndexSelect]
