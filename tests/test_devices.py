"""get_device / explain_device / available_devices / synchronize on real and simulated machines."""
from __future__ import annotations

import logging
import os

import pytest
import torch

from course_utils import data, explain_device, get_device, matmul, synchronize, timing, training
from course_utils.checks import machines
from course_utils.lab.devices import available_devices, resolve
from course_utils.probe import SimulatedMachine

NO_CUDA = not torch.cuda.is_available()




@pytest.fixture
def cpu_only(monkeypatch):
    """A machine with no accelerator, whatever this one has."""
    monkeypatch.setattr(torch.accelerator, "current_accelerator",
                        lambda check_available=False: None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


def simulate_cuda(monkeypatch, count=2, current=0):
    """A CUDA machine with ``count`` GPUs; returns the state whose "current" get_device sets."""
    state = {"current": current}
    monkeypatch.setattr(torch.accelerator, "current_accelerator",
                        lambda check_available=False: torch.device("cuda"))
    monkeypatch.setattr(torch.accelerator, "current_device_index", lambda: state["current"])
    monkeypatch.setattr(torch.accelerator, "set_device_index",
                        lambda index: state.update(current=index))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    return state


def simulate_mps(monkeypatch):
    monkeypatch.setattr(torch.accelerator, "current_accelerator",
                        lambda check_available=False: torch.device("mps"))
    monkeypatch.setattr(torch.accelerator, "current_device_index", lambda: 0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)


@pytest.fixture
def sync_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.accelerator, "synchronize", lambda device=None: calls.append(device))
    return calls


# ------------------------------------------------------------------ resolve

def test_resolve_gives_the_default_for_none_and_checks_anything_else():
    with SimulatedMachine(machines.TWO_GPUS):
        assert resolve(None, "f") == torch.device("cuda", 0)  # get_device() by default
        assert resolve(None, "f", default=torch.device("cpu")) == torch.device("cpu")
        assert resolve(None, "f", default=lambda: torch.device("cuda", 1)) == \
            torch.device("cuda", 1)
        assert resolve("CUDA:1", "f") == torch.device("cuda", 1)


def test_resolve_names_the_function_the_argument_the_value_and_what_is_allowed(cpu_only):
    with pytest.raises(ValueError, match=r"^fit\(device=...\) asks for device 'cuda', but no "
                                         r"cuda device is available.*Available here: cpu\.$"):
        resolve("cuda", "fit")
    with pytest.raises(TypeError, match=r"^fit: device must be a device name such as 'cuda' or "
                                        r"'cpu', a torch.device or None, got 0\. Available here: "
                                        r"cpu\.$"):
        resolve(0, "fit")


def test_the_helpers_state_their_defaults():
    """Data are made on the CPU unless asked; training and timing use get_device()."""
    with SimulatedMachine(machines.XPU):
        assert data.regression_data(4)[0].device == torch.device("cpu")
        timed = timing.benchmark(lambda: None, min_run_time=0.001)
        assert timed.device == torch.device("xpu", 0)  # get_device(): the simulated XPU
    for helper in (data.toy_tensors, data.digits_tensors, data.regression_data, data.image_data):
        assert "(default: the CPU)" in " ".join(helper.__doc__.split()), helper.__name__
    for helper in (timing.benchmark, timing.synchronized_clock, matmul.matmul_sweep,
                   matmul.peak_flop_per_s, training.fit):
        assert "get_device" in helper.__doc__, helper.__name__
    with pytest.raises(ValueError, match=r"^fit\(device=...\) asks for device 'gpu'"):
        model = torch.nn.Linear(2, 2)
        training.fit(model, [], torch.nn.functional.mse_loss,
                     torch.optim.SGD(model.parameters(), lr=0.1), 1, device="gpu")


# ------------------------------------------------------------------ CPU

def test_cpu_machine_picks_the_cpu(cpu_only):
    choice = explain_device()
    assert choice.device == torch.device("cpu")
    assert choice.reason == "no accelerator is available, so the CPU is used"
    assert get_device() == torch.device("cpu")
    assert available_devices() == ["cpu"]


@pytest.mark.skipif(not NO_CUDA, reason="describes a machine without CUDA")
def test_this_machine_without_mocks():
    assert get_device().type in ("cpu", "mps", "xpu")
    assert available_devices()[-1] == "cpu"


@pytest.mark.parametrize("where", ["prefer", "COURSE_DEVICE"])
def test_meta_is_refused_because_it_computes_nothing(cpu_only, monkeypatch, where):
    """Checks 'meta' (shapes without data) is never picked to train or time on."""
    if where == "COURSE_DEVICE":
        monkeypatch.setenv("COURSE_DEVICE", "meta")
    with pytest.raises(ValueError) as raised:
        get_device(prefer="meta" if where == "prefer" else None)
    message = str(raised.value)
    assert "'meta'" in message and "no data" in message and message.endswith("Use one of: cpu.")


@pytest.mark.parametrize("request_, device", [("CPU", "cpu"), (" Cpu ", "cpu")])
def test_device_names_are_case_insensitive(cpu_only, request_, device):
    assert get_device(prefer=request_) == torch.device(device)


def test_case_insensitive_on_a_gpu_box(monkeypatch):
    simulate_cuda(monkeypatch, count=2)
    monkeypatch.setenv("COURSE_DEVICE", "CUDA:1")
    assert get_device() == torch.device("cuda", 1)


@pytest.mark.parametrize("request_, suggested", [("gpu", "'cuda'"), ("GPU:1", "'cuda:1'"),
                                                 ("cdua", "'cuda'"), ("metal", "'mps'")])
def test_a_near_miss_gets_the_real_name_suggested(cpu_only, request_, suggested):
    with pytest.raises(ValueError) as raised:
        get_device(prefer=request_)
    message = str(raised.value)
    assert f"{request_!r}, which is not a device name. Did you mean {suggested}" in message
    assert "is available here" in message  # and says this machine has none of it


def test_gpu_suggests_cuda_where_cuda_is_there(monkeypatch):
    simulate_cuda(monkeypatch, count=1)
    with pytest.raises(ValueError, match=r"Did you mean 'cuda'\? Available here: cuda:0, cpu\."):
        get_device(prefer="gpu")


def test_tpu_gets_no_misleading_suggestion(cpu_only):
    with pytest.raises(ValueError) as raised:
        get_device(prefer="tpu")
    assert "Did you mean" not in str(raised.value)


def test_prefer_accepts_a_device_object(cpu_only):
    assert get_device(prefer=torch.device("cpu")) == torch.device("cpu")


# ------------------------------------------------------------------ precedence

def test_course_device_beats_prefer(cpu_only, monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    choice = explain_device(prefer="gpu")  # prefer is not even looked at
    assert choice.device == torch.device("cpu")
    assert choice.reason == "COURSE_DEVICE=cpu is set"


def test_course_device_beats_prefer_and_auto_on_a_gpu_box(monkeypatch):
    simulate_cuda(monkeypatch, count=2)
    monkeypatch.setenv("COURSE_DEVICE", " cuda:1 ")  # surrounding blanks are ignored
    assert get_device(prefer="cpu") == torch.device("cuda", 1)
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    assert get_device(prefer="cuda:0") == torch.device("cpu")


def test_empty_course_device_is_ignored(cpu_only, monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "  ")
    assert explain_device().reason == "no accelerator is available, so the CPU is used"


def test_prefer_beats_auto(monkeypatch):
    simulate_cuda(monkeypatch)
    choice = explain_device(prefer="cpu")
    assert choice.device == torch.device("cpu")
    assert choice.reason == "prefer='cpu' was requested"


# ------------------------------------------------------------------ bad requests

# Explicit ids: a bare "gpu" id would become a keyword that the gpu-skip rule matches.
BAD_REQUESTS = [pytest.param(value, id=f"bad-{value}") for value in ["gpu", "cuda:7", "tpu"]]


@pytest.mark.parametrize("request_", BAD_REQUESTS + [pytest.param("CUDA", id="bad-CUDA-here"),
                                                     pytest.param("mps", id="bad-mps")])
def test_bad_prefer_names_the_value_and_lists_devices(cpu_only, request_):
    with pytest.raises(ValueError) as raised:
        get_device(prefer=request_)
    message = str(raised.value)
    assert repr(request_) in message
    assert "get_device(prefer=...)" in message
    assert message.endswith("Available here: cpu.")


@pytest.mark.parametrize("request_", BAD_REQUESTS)
def test_bad_course_device_names_the_variable(cpu_only, monkeypatch, request_):
    monkeypatch.setenv("COURSE_DEVICE", request_)
    with pytest.raises(ValueError) as raised:
        get_device()
    message = str(raised.value)
    assert "COURSE_DEVICE" in message and repr(request_) in message
    assert message.endswith("Available here: cpu.")


def test_missing_gpu_index_on_a_two_gpu_box(monkeypatch):
    simulate_cuda(monkeypatch, count=2)
    with pytest.raises(ValueError, match=r"'cuda:7'.*only 2 cuda device\(s\).*"
                                         r"Available here: cuda:0, cuda:1, cpu\."):
        get_device(prefer="cuda:7")


# ------------------------------------------------------------------ simulated accelerators

def test_cuda_is_picked_with_its_index(monkeypatch):
    simulate_cuda(monkeypatch, count=2, current=1)
    choice = explain_device()
    assert choice.device == torch.device("cuda", 1)
    assert choice.reason == "torch.accelerator found a cuda device"
    assert available_devices() == ["cuda:0", "cuda:1", "cpu"]


def test_second_gpu_is_valid_with_two_devices(monkeypatch):
    state = simulate_cuda(monkeypatch, count=2)
    assert get_device(prefer="cuda:1") == torch.device("cuda", 1)
    assert state["current"] == 1, "the chosen GPU must become the current one"
    with pytest.raises(ValueError, match="only 2 cuda"):
        get_device(prefer="cuda:2")


@pytest.mark.parametrize("how", ["prefer", "COURSE_DEVICE"])
def test_a_request_without_index_gets_the_current_one(monkeypatch, how):
    """'cuda' means the current GPU; get_device() says which, as a tensor there would."""
    simulate_cuda(monkeypatch, count=2, current=1)
    if how == "prefer":
        device = get_device(prefer="cuda")
    else:
        monkeypatch.setenv("COURSE_DEVICE", "cuda")
        device = get_device()
    assert device == torch.device("cuda", 1) and str(device) == "cuda:1"


def test_mps_is_picked_with_the_index_its_tensors_report(monkeypatch):
    """MPS tensors report mps:0, so get_device() returns mps:0: x.device == device holds."""
    simulate_mps(monkeypatch)
    device = get_device()
    assert str(device) == "mps:0" and device == torch.device("mps", 0)
    assert device != torch.device("mps")  # the trap: an index-less device never equals it
    assert available_devices() == ["mps:0", "cpu"]
    assert get_device(prefer="mps") == torch.device("mps", 0)
    assert get_device(prefer="mps:0") == torch.device("mps", 0)
    with pytest.raises(ValueError, match="only 1 mps"):
        get_device(prefer="mps:1")
    with pytest.raises(ValueError, match="no cuda device"):
        get_device(prefer="cuda")


@pytest.mark.parametrize("request_", ["cpu", torch.device("cpu")])
def test_a_tensor_created_on_the_device_reports_the_same_device(cpu_only, request_):
    device = get_device(prefer=request_)
    assert torch.zeros(2, device=device).device == device
    assert torch.zeros(2).to(device).device == device


# ------------------------------------------------------------------ synchronize

def test_synchronize_is_a_no_op_on_the_cpu(cpu_only, sync_calls):
    assert synchronize("cpu") is None
    synchronize(torch.device("cpu"))
    synchronize()  # get_device() is the CPU here
    synchronize("meta")
    assert sync_calls == []


def test_synchronize_waits_for_an_accelerator(monkeypatch, sync_calls):
    simulate_cuda(monkeypatch, count=2)
    synchronize("cuda:1")
    synchronize()
    synchronize("cpu")
    assert sync_calls == [torch.device("cuda", 1), torch.device("cuda", 0)]


def test_synchronize_on_mps(monkeypatch, sync_calls):
    simulate_mps(monkeypatch)
    synchronize()
    assert sync_calls == [torch.device("mps", 0)]


# ------------------------------------------------------------------ a real GPU

@pytest.mark.gpu
@pytest.mark.skipif(NO_CUDA, reason="needs a CUDA GPU; torch.cuda.is_available() is False here")
def test_real_gpu():
    device = get_device()
    assert device.type == "cuda"
    assert f"cuda:{device.index}" in available_devices()
    x = torch.randn(512, 512).to(device)
    assert x.device == device and x.is_cuda  # get_device() carries the index tensors report
    y = x @ x
    synchronize(device)  # returns once the matmul has finished
    assert y.device == x.device
    torch.testing.assert_close(y.cpu(), x.cpu() @ x.cpu(), rtol=1e-2, atol=1e-2)


# ------------------------------------------------------------------ a CUDA build without a driver

@pytest.mark.parametrize("cuda_build, available, preset, expected", [
    ("13.0", False, None, "5"),       # PyPI's Linux wheel, no driver: quiet Kineto's driver error
    ("13.0", False, "2", "2"),        # the user's own setting is kept
    ("13.0", True, None, None),       # a real GPU: the profiler's messages matter
    (None, False, None, None),        # a CPU-only build never asks for GPUs
])
def test_profiler_kept_quiet_only_on_a_cuda_build_without_a_gpu(monkeypatch, cuda_build,
                                                                  available, preset, expected):
    """Checks get_device() sets KINETO_LOG_LEVEL only where Kineto would log a driver error."""
    monkeypatch.setattr(torch.version, "cuda", cuda_build)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    if preset is None:
        monkeypatch.delenv("KINETO_LOG_LEVEL", raising=False)
    else:
        monkeypatch.setenv("KINETO_LOG_LEVEL", preset)
    get_device()
    assert os.environ.get("KINETO_LOG_LEVEL") == expected


def test_cuda_runtime_note_of_the_extension_builder_is_dropped_and_nothing_else(caplog):
    """Checks cpp_extension's "No CUDA runtime is found" note is dropped, its other warnings kept.

    On PyPI's CUDA build with a CUDA toolkit and no GPU, importing torch.utils.benchmark logs
    the note into a lesson's first cell; the course's helpers drop it (course_utils.lab).
    """
    logger = logging.getLogger("torch.utils.cpp_extension")
    with caplog.at_level(logging.WARNING, logger=logger.name):
        logger.warning("No CUDA runtime is found, using CUDA_HOME='%s'", "/usr/local")
        logger.warning("There are no %s version bounds defined for CUDA version %s", "g++", "13")
    assert [r.getMessage() for r in caplog.records] == [
        "There are no g++ version bounds defined for CUDA version 13"]

