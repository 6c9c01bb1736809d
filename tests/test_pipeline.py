"""course_utils.lab.pipeline: the slow dataset, epoch timings, GPU-only measurements."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import DataLoader

from course_utils import pipeline, timing


def tensors(n=8):
    return torch.arange(n, dtype=torch.float32).reshape(n, 1), torch.arange(n)


# ------------------------------------------------------------------ SlowDataset

def test_slow_dataset_returns_the_examples_after_its_delay():
    features, labels = tensors()
    dataset = pipeline.SlowDataset(features, labels, seconds=0.002)
    assert len(dataset) == 8
    started = time.perf_counter()
    x, y = dataset[5]
    assert time.perf_counter() - started >= 0.002  # sleep() never returns early
    assert x.tolist() == [5.0] and y.item() == 5


def test_slow_dataset_makes_every_kth_example_slow():
    dataset = pipeline.SlowDataset(*tensors(), seconds=0.001, slow_every=4, slow_seconds=0.02)
    assert [dataset.delay(i) for i in range(6)] == [0.02, 0.001, 0.001, 0.001, 0.02, 0.001]
    assert pipeline.SlowDataset(*tensors(), seconds=0.001).delay(0) == 0.001  # slow_every=0: none


def test_slow_dataset_loads_in_worker_processes():
    loader = DataLoader(pipeline.SlowDataset(*tensors(), seconds=0.0), batch_size=4,
                        num_workers=2)
    assert sorted(torch.cat([labels for _, labels in loader]).tolist()) == list(range(8))


@pytest.mark.slow
def test_slow_dataset_loads_in_spawned_workers():
    """The lesson's point: a class in a module can be imported by a spawned worker."""
    loader = DataLoader(pipeline.SlowDataset(*tensors(), seconds=0.0), batch_size=8,
                        num_workers=1, multiprocessing_context="spawn")
    assert next(iter(loader))[1].tolist() == list(range(8))


@pytest.mark.parametrize("kwargs, error, says", [
    ({"features": [1.0, 2.0]}, TypeError, "needs two tensors, got list and Tensor"),
    ({"labels": torch.arange(3)}, ValueError,
     r"same first dimension; got shapes \(8, 1\) and \(3,\)"),
    ({"seconds": -0.1}, ValueError,
     "seconds must be a number of seconds between 0 and 1, got -0.1"),
    ({"seconds": 5}, ValueError, "got 5"),
    ({"seconds": "0.1"}, ValueError, "got '0.1'"),
    ({"seconds": True}, ValueError, "got True"),
    ({"slow_every": -1}, ValueError, "slow_every must be a whole number of at least 0, got -1"),
    ({"slow_every": 2.5}, ValueError, "got 2.5"),
    ({"slow_seconds": 2.0}, ValueError, "slow_seconds must be a number of seconds"),
])
def test_slow_dataset_rejects_bad_input(kwargs, error, says):
    features, labels = tensors()
    arguments = {"features": features, "labels": labels, **kwargs}
    with pytest.raises(error, match=f"SlowDataset.*{says}"):
        pipeline.SlowDataset(**arguments)


# ------------------------------------------------------------------ time_epochs

def test_time_epochs_times_each_epoch_and_its_first_batch():
    calls = []
    times = pipeline.time_epochs([1, 2, 3], epochs=2, step=calls.append)
    assert calls == [1, 2, 3, 1, 2, 3]
    assert len(times.seconds) == len(times.first_batch_s) == 2
    assert all(first <= whole for first, whole in zip(times.first_batch_s, times.seconds,
                                                        strict=True))
    assert times.summary().startswith("epochs took ")


def test_time_epochs_of_an_empty_loader_has_no_first_batch():
    assert torch.isnan(torch.tensor(pipeline.time_epochs([], epochs=1).first_batch_s[0]))


@pytest.mark.parametrize("epochs", [0, -1, 1.5, True])
def test_time_epochs_rejects_bad_epochs(epochs):
    with pytest.raises(ValueError, match=f"epochs must be a whole number of at least 1, got "
                                         f"{epochs!r}"):
        pipeline.time_epochs([1], epochs=epochs)


# ------------------------------------------------------------------ GPU-only measurements

@pytest.mark.gpu
def test_pinned_copies_timed_as_lesson_04_does_are_not_slower_than_pageable_ones():
    def copy_seconds(pinned):
        host = torch.empty(64 * 10**6, dtype=torch.uint8, pin_memory=pinned)
        return timing.benchmark(lambda: host.to("cuda", non_blocking=pinned), "cuda").median_s
    assert 0 < copy_seconds(True) < copy_seconds(False) * 1.2


def fake_profile(*ranges, annotations=()):
    """A stand-in for a finished torch.profiler run: (device type, start µs, end µs) events,
    and ``annotations``: record_function ranges as they show on the device's timeline."""
    events = [SimpleNamespace(device_type=kind, time_range=SimpleNamespace(start=start, end=end),
                              is_user_annotation=annotated)
              for annotated, spans in ((False, ranges), (True, annotations))
              for kind, start, end in spans]
    return SimpleNamespace(events=lambda: events)


def test_device_busy_seconds_counts_overlapping_device_events_once():
    cuda, cpu = torch.autograd.DeviceType.CUDA, torch.autograd.DeviceType.CPU
    profile = fake_profile((cuda, 0, 100), (cuda, 50, 150), (cpu, 0, 10_000), (cuda, 200, 210),
                           (cuda, 202, 205))
    assert pipeline.device_busy_seconds(profile) == pytest.approx(160e-6)
    assert pipeline.device_busy_seconds(fake_profile((cpu, 0, 50))) == 0.0


def test_device_busy_seconds_leaves_out_record_function_ranges_on_the_device():
    """Checks a record_function range on the GPU's timeline, which spans the gaps between its
    kernels, does not count as busy time (lesson 04 measured 10 ms for 0.6 ms of kernels)."""
    cuda = torch.autograd.DeviceType.CUDA
    profile = fake_profile((cuda, 100, 110), (cuda, 5_000, 5_030), annotations=[(cuda, 0, 9_000)])
    assert pipeline.device_busy_seconds(profile) == pytest.approx(40e-6)


def test_device_busy_seconds_of_a_cpu_profile_is_zero():
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as run:
        torch.ones(64, 64) @ torch.ones(64, 64)
    assert pipeline.device_busy_seconds(run) == 0.0


@pytest.mark.gpu
def test_device_busy_seconds_sees_gpu_work_and_idle_time():
    from torch.profiler import ProfilerActivity, profile, record_function

    a = torch.randn(2048, 2048, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as run:
        torch.cuda.synchronize()
        started = time.perf_counter()
        with record_function("all of it"):  # a range on the GPU's timeline that must not count
            for _ in range(5):
                a @ a
            torch.cuda.synchronize()
            time.sleep(0.05)  # the GPU idles
        wall = time.perf_counter() - started
    busy = pipeline.device_busy_seconds(run)
    assert 0 < busy < wall - 0.04
