"""Measuring an input pipeline (lesson 04, "Feeding the GPU").

Timing the loader and the step of each batch apart is lesson 04's first exercise
(``find_bottleneck``): the learner writes it, so nothing here does it.

* :class:`SlowDataset` -- a map-style dataset whose examples take a set time to load, a stand-in
  for reading files from a slow disk or a network share. It is defined in this module, not in a
  notebook, because DataLoader workers started with ``spawn`` or ``forkserver`` (macOS, Windows,
  Linux from Python 3.14) must *import* the dataset's class: a class defined in a notebook cannot
  be imported by another process.
* :func:`time_epochs` -> :class:`EpochTimes` -- for each epoch, the wall time and the wait for the
  first batch (where worker start-up shows).
* :func:`device_busy_seconds` -- from a ``torch.profiler`` run, the time the GPU spent in kernels.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import torch
from torch.utils.data import Dataset

from .args import is_real, whole_number
from .devices import resolve, synchronize

__all__ = [
    "EpochTimes",
    "SlowDataset",
    "device_busy_seconds",
    "time_epochs",
]


def _seconds(value, name: str, owner: str) -> float:
    if not is_real(value) or not 0 <= value <= 1:
        raise ValueError(f"{owner}: {name} must be a number of seconds between 0 and 1, "
                         f"got {value!r}.")
    return float(value)


# ------------------------------------------------------------------ a slow dataset

class SlowDataset(Dataset):
    """Examples that take ``seconds`` each to load; every ``slow_every``-th takes ``slow_seconds``.

    Loading sleeps, as a process waiting for a disk or a network does: the CPU is free
    meanwhile, which is why several DataLoader workers can wait at the same time even on a
    machine with few cores. (Decoding JPEGs or augmenting images keeps a core busy instead;
    then workers help only as far as there are free cores.) ``features[i], labels[i]`` are
    returned as they are: keep them on the CPU, where the workers run.
    """

    def __init__(self, features: torch.Tensor, labels: torch.Tensor, seconds: float = 0.001,
                 slow_every: int = 0, slow_seconds: float = 0.0):
        if not isinstance(features, torch.Tensor) or not isinstance(labels, torch.Tensor):
            raise TypeError(f"SlowDataset needs two tensors, got {type(features).__name__} and "
                            f"{type(labels).__name__}.")
        if features.ndim == 0 or labels.ndim == 0 or features.shape[0] != labels.shape[0]:
            raise ValueError(f"SlowDataset needs features and labels with the same first "
                             f"dimension; got shapes {tuple(features.shape)} and "
                             f"{tuple(labels.shape)}.")
        self.features, self.labels = features, labels
        self.seconds = _seconds(seconds, "seconds", "SlowDataset")
        self.slow_every = whole_number(slow_every, "slow_every", "SlowDataset")
        self.slow_seconds = _seconds(slow_seconds, "slow_seconds", "SlowDataset")

    def __len__(self) -> int:
        return self.labels.shape[0]

    def delay(self, index: int) -> float:
        """How long example ``index`` takes to load."""
        slow = self.slow_every and index % self.slow_every == 0
        return self.slow_seconds if slow else self.seconds

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(self.delay(index))
        return self.features[index], self.labels[index]


# ------------------------------------------------------------------ whole epochs

@dataclass
class EpochTimes:
    """Per epoch: the wall seconds, and the seconds until the first batch arrived."""

    seconds: list[float] = field(default_factory=list)
    first_batch_s: list[float] = field(default_factory=list)

    def summary(self) -> str:
        def ms(values: Sequence[float]) -> str:
            return ", ".join(f"{value * 1e3:.0f}" for value in values)
        return f"epochs took {ms(self.seconds)} ms; first batch after {ms(self.first_batch_s)} ms"


def time_epochs(loader: Iterable, epochs: int = 2, step: Callable | None = None,
                device="cpu") -> EpochTimes:
    """Iterate ``loader`` for ``epochs`` epochs (calling ``step(batch)`` if given), timing each;
    ``device`` (default: the CPU) is synchronised before the clock starts and before it stops."""
    whole_number(epochs, "epochs", "time_epochs", minimum=1)
    device = resolve(device, "time_epochs", default=torch.device("cpu"))
    times = EpochTimes()
    for _ in range(epochs):
        synchronize(device)
        started = time.perf_counter()
        first = None
        for batch in loader:
            if first is None:
                first = time.perf_counter() - started
            if step is not None:
                step(batch)
        synchronize(device)
        times.seconds.append(time.perf_counter() - started)
        times.first_batch_s.append(first if first is not None else float("nan"))
    return times


# ------------------------------------------------------------------ the profiler

def device_busy_seconds(profile) -> float:
    """Seconds during which the accelerator ran something, in a ``torch.profiler`` run.

    The union of the time ranges of the profile's device events (kernels, copies, memsets):
    kernels that overlap on several streams count once. A ``record_function`` range also shows
    on the device's timeline (a user annotation), spanning the gaps between its kernels: it is
    left out, as PyTorch's own device-time totals leave it out. 0.0 when only the CPU was
    profiled.
    """
    intervals = sorted((event.time_range.start, event.time_range.end)
                       for event in profile.events()
                       if event.device_type != torch.autograd.DeviceType.CPU
                       and not event.is_user_annotation)
    busy_us, covered_until = 0.0, float("-inf")
    for start, end in intervals:
        if end > covered_until:
            busy_us += end - max(start, covered_until)
            covered_until = end
    return busy_us / 1e6
