"""probe_support.SimulatedClock, and SimulatedMachine's synchronize() where a device is missing."""
from __future__ import annotations

import threading
import time
import timeit

import pytest
import torch

from course_utils.checks import machines
from course_utils.probe import SimulatedClock, SimulatedMachine, StopProbe


def test_the_clocks_read_the_simulated_time_and_log_each_reading():
    log = []
    with SimulatedMachine(machines.CPU), SimulatedClock(log, start=10.0) as clock:
        assert time.perf_counter() == 10.0
        clock.cpu(0.5)
        assert time.time() == time.monotonic() == timeit.default_timer() == 10.5
        assert time.perf_counter_ns() == 10_500_000_000
    assert [event["event"] for event in log] == ["clock"] * 5
    assert time.perf_counter() != 10.5  # restored


def test_launched_work_runs_later_and_synchronize_waits_for_its_device():
    log = []
    with SimulatedMachine(machines.TWO_GPUS), SimulatedClock(log, start=0.0) as clock:
        clock.launch("cuda:1", 2.0)
        clock.launch("cuda:1", 1.0)          # queued behind the first
        assert time.perf_counter() == 0.0 and log[-1]["pending"] == ["cuda:1"]
        torch.cuda.synchronize()             # the current device, cuda:0: nothing to wait for
        assert time.perf_counter() == 0.0
        torch.cuda.synchronize("cuda:1")
        assert time.perf_counter() == 3.0 and log[-1]["pending"] == []
    syncs = [event for event in log if event["event"] == "sync"]
    assert [(e["api"], e["device"]) for e in syncs] == [
        ("torch.cuda.synchronize", "cuda:0"), ("torch.cuda.synchronize", "cuda:1")]


@pytest.mark.parametrize("spec, call, device", [
    (machines.CUDA, lambda: torch.accelerator.synchronize(), "cuda:0"),
    (machines.TWO_GPUS, lambda: torch.accelerator.synchronize(torch.device("cuda:1")), "cuda:1"),
    (machines.TWO_GPUS, lambda: torch.cuda.synchronize(1), "cuda:1"),
    (machines.MPS, lambda: torch.mps.synchronize(), "mps"),
    (machines.MPS, lambda: torch.accelerator.synchronize(), "mps"),
    (machines.XPU, lambda: torch.accelerator.synchronize(), "xpu:0"),
    (machines.XPU, lambda: torch.xpu.synchronize(0), "xpu:0"),
])
def test_every_synchronize_names_the_device_it_waited_for(spec, call, device):
    log = []
    with SimulatedMachine(spec), SimulatedClock(log, start=0.0) as clock:
        clock.launch(device, 1.0)
        call()
        assert clock.now == 1.0
    assert log[-1]["device"] == device


@pytest.mark.parametrize("call, api", [
    (lambda: torch.accelerator.synchronize(), "torch.accelerator.synchronize"),
    (lambda: torch.mps.synchronize(), "torch.mps.synchronize"),
    (lambda: torch.cuda.synchronize(), "torch.cuda.synchronize"),
    (lambda: torch.xpu.synchronize(), "torch.xpu.synchronize"),
])
def test_synchronising_a_missing_device_raises_as_torch_does(call, api):
    log = []
    with SimulatedMachine(machines.CPU), SimulatedClock(log), pytest.raises(RuntimeError):
        call()
    assert log == [{"event": "sync", "api": api, "device": None}]


def test_names_bound_to_the_real_clocks_are_replaced_then_restored():
    namespace = {"perf_counter": time.perf_counter, "other": len}
    with SimulatedMachine(machines.CPU), SimulatedClock(start=5.0, namespaces=[namespace]):
        assert namespace["perf_counter"]() == 5.0 and namespace["other"] is len
    assert namespace["perf_counter"] is time.perf_counter


def test_other_threads_keep_the_real_clock():
    seen = []
    with SimulatedMachine(machines.CPU), SimulatedClock(start=5.0):
        thread = threading.Thread(target=lambda: seen.append(time.perf_counter()))
        thread.start()
        thread.join()
    assert seen[0] != 5.0


def test_a_loop_waiting_for_the_clock_is_stopped():
    with SimulatedMachine(machines.CPU), SimulatedClock(limit=100), pytest.raises(StopProbe):
        while time.perf_counter() < 1e9:
            pass


@pytest.mark.parametrize("spec, call, error", [
    (machines.CUDA, lambda: torch.accelerator.synchronize(torch.device("cpu")),
     "cpu doesn't match the current accelerator cuda."),
    (machines.MPS, lambda: torch.accelerator.synchronize("cuda"),
     "cuda doesn't match the current accelerator mps."),
    (machines.CUDA, lambda: torch.cuda.synchronize(torch.device("cpu")),
     "Expected a cuda device, but got: cpu"),
])
def test_synchronising_a_device_of_another_type_raises_as_torch_does(spec, call, error):
    """torch's own checks: a CPU device given to an accelerator's synchronize() is refused."""
    log = []
    with SimulatedMachine(spec), SimulatedClock(log), pytest.raises(ValueError) as raised:
        call()
    assert str(raised.value) == error and log[-1]["device"] is None


def test_a_device_without_index_means_the_current_gpu():
    log = []
    with SimulatedMachine(machines.TWO_GPUS), SimulatedClock(log, start=0.0) as clock:
        torch.cuda.set_device(1)
        clock.launch("cuda:1", 1.0)
        torch.cuda.synchronize("cuda")
        assert clock.now == 1.0
    assert log[-1]["device"] == "cuda:1"


def test_clocks_bound_in_a_functions_defaults_and_closure_are_replaced_then_restored():
    def make(read=time.perf_counter):
        def timer(clock=time.monotonic, *, other=time.time):
            return read(), clock(), other()
        return timer
    timer = make()
    with SimulatedMachine(machines.CPU), SimulatedClock(start=5.0, functions=[timer, len]):
        assert timer() == (5.0, 5.0, 5.0)
    assert timer.__defaults__ == (time.monotonic,) and timer.__kwdefaults__ == {
        "other": time.time} and timer.__closure__[0].cell_contents is time.perf_counter


def test_device_events_record_when_the_device_reaches_them():
    log = []
    with SimulatedMachine(machines.TWO_GPUS), SimulatedClock(log, start=0.0) as clock:
        start, end = torch.cuda.Event(enable_timing=True), torch.Event(enable_timing=True)
        clock.launch("cuda:0", 1.0)
        start.record()                       # behind the queued second
        clock.launch("cuda:0", 2.0)
        end.record()
        with pytest.raises(RuntimeError, match="completed"):
            start.elapsed_time(end)          # the device is not there yet
        end.synchronize()
        assert clock.now == 3.0 and start.elapsed_time(end) == 2000.0
    assert [event["event"] for event in log] == ["clock", "clock", "unfinished", "sync"]
    assert torch.cuda.Event is not start.__class__


@pytest.mark.parametrize("spec, device", [(machines.CPU, None), (machines.CUDA, "cpu")])
def test_cpu_events_are_refused_as_torch_refuses_them(spec, device):
    with SimulatedMachine(spec), SimulatedClock(), pytest.raises(RuntimeError, match="cpu"):
        torch.Event(device=device, enable_timing=True).record()
