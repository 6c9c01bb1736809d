"""Input-pipeline figures of lesson 04, measured in one run on this machine.

    .venv/bin/python benchmarks/input_pipeline.py

* on-device batching vs a DataLoader: one epoch of batches of scikit-learn's digits (1,347
  training images, batches of 64, shuffled, moved to the device), with ``DataLoader`` over a
  ``TensorDataset`` and with ``data.TensorBatches`` on the device;
* ``num_workers`` 0 vs 2 (persistent workers, the first epoch left out): over the same digits,
  and over ``pipeline.SlowDataset`` (0.5 ms per example, a stand-in for a slow disk).

Prints each time and the ratios. Run it on an otherwise idle machine: it is a benchmark, not a
test.
"""
from __future__ import annotations

import multiprocessing
import platform
import statistics

import torch
from torch.utils import benchmark
from torch.utils.data import DataLoader, TensorDataset

from course_utils import data, get_device, pipeline, report, synchronize


def machine(device: torch.device) -> str:
    return (f"{report.describe_machine(device)}, Python {platform.python_version()}, "
            f"start method {multiprocessing.get_start_method()}")


def epoch_seconds(batches, device: torch.device) -> float:
    """Median seconds of one epoch of batches, each moved to ``device``."""
    def epoch():
        for features, labels in batches:
            features, labels = features.to(device), labels.to(device)
        synchronize(device)

    timer = benchmark.Timer("epoch()", globals={"epoch": epoch})
    return timer.blocked_autorange(min_run_time=1.0).median


def steady_epoch_seconds(dataset, workers: int) -> float:
    """Median seconds of epochs 2 to 5 of a shuffling DataLoader with ``workers`` workers."""
    loader = DataLoader(dataset, batch_size=64, shuffle=True, num_workers=workers,
                        persistent_workers=workers > 0)
    return statistics.median(pipeline.time_epochs(loader, epochs=5).seconds[1:])


def main() -> None:
    device = get_device()
    print(f"machine: {machine(device)}")
    X_train, y_train, _, _ = data.digits_tensors(seed=0)

    loader = DataLoader(TensorDataset(X_train, y_train), batch_size=64, shuffle=True)
    on_device = data.TensorBatches(X_train.to(device), y_train.to(device), batch_size=64,
                                   shuffle=True, seed=0)
    loader_s, on_device_s = epoch_seconds(loader, device), epoch_seconds(on_device, device)
    print(f"digits, one epoch of {len(loader)} batches: DataLoader(TensorDataset) "
          f"{loader_s * 1e3:.2f} ms, TensorBatches on {device} {on_device_s * 1e3:.2f} ms: "
          f"on-device batching is {loader_s / on_device_s:.1f}x as fast")

    slow = pipeline.SlowDataset(X_train[:512], y_train[:512], seconds=0.0005)
    for name, dataset in [("digits (TensorDataset)", TensorDataset(X_train, y_train)),
                          ("SlowDataset, 0.5 ms per example", slow)]:
        zero, two = steady_epoch_seconds(dataset, 0), steady_epoch_seconds(dataset, 2)
        print(f"{name}, one epoch: num_workers=0 {zero * 1e3:.1f} ms, num_workers=2 "
              f"{two * 1e3:.1f} ms: two workers are {zero / two:.2f}x as fast")


if __name__ == "__main__":
    main()
