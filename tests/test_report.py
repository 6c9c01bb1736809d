"""course_utils.lab.report: the machine a figure was measured on, and a quiet profiler."""
from __future__ import annotations

import os

import pytest
import torch

from course_utils import get_device, report
from course_utils.checks import machines
from course_utils.probe import SimulatedMachine

# ------------------------------------------------------------------ the machine

def test_describe_machine_names_cores_threads_torch_and_device():
    line = report.describe_machine("cpu")
    assert line.startswith(f"{os.cpu_count()} CPU cores (")
    assert f"{torch.get_num_threads()} PyTorch threads" in line
    assert f"PyTorch {torch.__version__}" in line and line.endswith("device cpu (the CPU)")
    assert report.describe_machine("meta").endswith("device meta (PyTorch's meta device: shapes "
                                                    "only, no data)")


def test_describe_machine_names_an_xpu_by_its_name_never_the_cpu():
    """An XPU (a type the backend table does not name) is named by torch.xpu, not 'the CPU'."""
    with SimulatedMachine(machines.XPU) as machine:
        line = report.describe_machine("xpu:0")
    assert line.endswith("device xpu:0 (Intel(R) Data Center GPU Max 1550)")
    assert "the CPU" not in line and "torch.xpu.get_device_name" in machine.queries


def test_describe_machine_names_a_simulated_gpu_and_defaults_to_get_device():
    with SimulatedMachine(machines.TWO_GPUS):
        assert report.describe_machine().endswith("device cuda:0 (NVIDIA A100-SXM4-40GB)")


def test_describe_machine_refuses_what_is_not_a_device():
    with pytest.raises(TypeError, match=r"describe_machine: device must be .* got 3\."):
        report.describe_machine(3)
    with pytest.raises(ValueError, match=r"describe_machine\(device=...\) asks for device 'gpu'"):
        report.describe_machine("gpu")


@pytest.mark.gpu
def test_on_a_gpu_the_machine_line_names_it():
    assert torch.cuda.get_device_name() in report.describe_machine("cuda")


# ------------------------------------------------------------------ the profiler's log lines

def test_a_profile_leaves_stderr_empty(capfd):
    """Checks a lesson's profile writes nothing to stderr, on any build, with or without a GPU."""
    from torch.profiler import profile

    # As every lesson's first cell: on a CUDA build without a GPU, get_device() quiets Kineto's
    # "gpuGetDeviceCount failed" error, which it reads at the process's first profile.
    get_device()
    with report.quiet_profiler_markers(), profile() as prof:
        torch.ones(3) + 1
    assert prof.key_averages()
    assert capfd.readouterr().err == ""


def test_only_the_profiler_markers_are_dropped(capfd):
    with report.quiet_profiler_markers():
        os.write(2, b"USDT:2026-11-25 01:37:33 17206:17206 SyncActivityProfilerHandler.cpp:52]"
                    b" profiler_start\nreal trouble\n")
    assert capfd.readouterr().err == "real trouble\n"
