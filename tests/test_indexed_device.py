"""A device chosen with its index (COURSE_DEVICE=cuda:1) is the device every lab helper uses.

Lesson 00 recommends COURSE_DEVICE=cuda:1 on shared servers. Code that says "the current
device" (CUDA events, is_bf16_supported, DataParallel's default device_ids) then has to mean
cuda:1 too: get_device() makes the chosen device current, and records keep the whole device.
"""
from __future__ import annotations

import pytest
import torch
from torch import nn

from course_utils import data, get_device, precision
from course_utils.checks import machines
from course_utils.probe import SimulatedMachine

# A mixed server: GPU 0 has no bfloat16 units, GPU 1 has them.
T4_AND_A100 = machines.machine("a server with a Tesla T4 and an NVIDIA A100",
                               {"cuda": ["T4", "A100"]})


def test_the_chosen_gpu_becomes_the_current_device(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cuda:1")
    with SimulatedMachine(T4_AND_A100) as machine:
        device = get_device()
        current = torch.accelerator.current_device_index()
    assert device == torch.device("cuda", 1)
    assert current == 1, "get_device() left GPU 0 current: CUDA events would time GPU 0"
    assert "torch.accelerator.set_device_index" in machine.queries


def test_the_policy_answers_for_the_chosen_gpu_and_keeps_its_index(monkeypatch):
    """The T4 (current before get_device) has no bfloat16 units; the chosen A100 has."""
    monkeypatch.setenv("COURSE_DEVICE", "cuda:1")
    with SimulatedMachine(T4_AND_A100):
        chosen = precision.amp_policy(get_device())
        explicit = precision.amp_policy("cuda:0")
    assert chosen.device == torch.device("cuda", 1)
    assert (chosen.dtype, chosen.use_scaler) == (torch.bfloat16, False)
    assert explicit.device == torch.device("cuda", 0)
    assert (explicit.dtype, explicit.use_scaler) == (torch.float16, True)


def test_a_policy_keeps_a_whole_device():
    assert precision.AmpPolicy("cuda:1", torch.bfloat16, False, "test").device == torch.device(
        "cuda", 1)


# ------------------------------------------------------------------ on real GPUs

@pytest.fixture
def second_gpu(monkeypatch):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs")
    monkeypatch.setenv("COURSE_DEVICE", "cuda:1")
    before = torch.cuda.current_device()
    yield get_device()
    torch.cuda.set_device(before)


@pytest.mark.gpu
def test_lab_helpers_run_on_the_second_gpu(second_gpu):
    device = second_gpu
    assert torch.cuda.current_device() == 1
    X_train, y_train, X_test, y_test = data.digits_tensors()
    train = data.TensorBatches(X_train[:256].to(device), y_train[:256].to(device), batch_size=64)
    test = data.TensorBatches(X_test.to(device), y_test.to(device), batch_size=512)
    run = precision.measure_training(
        lambda: nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)), train, test,
        precision.amp_policy(device), epochs=1)
    assert run.device == device and run.peak_bytes and run.peak_bytes > 0
    # Events recorded on the current stream now time the work queued on cuda:1.
    a = torch.randn(2048, 2048, device=device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        a @ a
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) > 0.05  # milliseconds: an idle GPU 0 stream gives ~0
    assert torch.ones(1, device="cuda").device == device  # "cuda" means the chosen GPU
