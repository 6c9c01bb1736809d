"""course_utils.lab.timing on the CPU (and on a CUDA GPU where there is one), bad inputs too."""
from __future__ import annotations

import os
import threading
import time

import pytest
import torch

from course_utils import matmul, timing
from course_utils.checks import machines
from course_utils.lab.matmul import MatmulPoint, PeakFigure
from course_utils.lab.timing import Timing
from course_utils.probe import SimulatedMachine

# ------------------------------------------------------------------ benchmark

def test_benchmark_times_a_call_with_all_threads_by_default():
    x = torch.randn(64, 64)
    result = timing.benchmark(lambda: x @ x, "cpu", label="x @ x", min_run_time=0.02)
    assert isinstance(result, Timing)
    assert result.device == torch.device("cpu") and result.label == "x @ x"
    assert result.threads == torch.get_num_threads()
    assert 0 < result.median_s < 0.1 and result.iqr_s >= 0 and result.calls >= 1
    assert str(result).startswith("x @ x on cpu (")


def test_benchmark_uses_the_thread_count_asked_for_and_restores_it():
    before = torch.get_num_threads()
    seen = []
    result = timing.benchmark(lambda: seen.append(torch.get_num_threads()), "cpu", threads=1,
                              min_run_time=0.01)
    assert result.threads == 1 and set(seen) == {1}
    assert torch.get_num_threads() == before


def test_benchmark_warms_up_before_it_measures():
    calls = []
    result = timing.benchmark(lambda: calls.append(1), "cpu", min_run_time=0.01)
    assert len(calls) > result.calls  # fn() also ran untimed first, to warm up


def test_benchmark_measures_the_median_of_a_known_duration():
    result = timing.benchmark(lambda: time.sleep(0.002), "cpu", min_run_time=0.05)
    assert 0.002 <= result.median_s < 0.05


def test_a_slow_call_still_gets_enough_blocks_for_a_spread():
    """One block has an IQR of 0, which would say 'no noise' about nothing."""
    calls = []
    result = timing.benchmark(lambda: calls.append(time.sleep(0.03)), "cpu", min_run_time=0.01)
    assert result.blocks >= timing.MIN_BLOCKS and result.calls_per_block == 1
    assert len(calls) == result.calls + 2, "a slow call costs a warm-up, a first look, the blocks"
    assert result.min_s <= result.median_s and "median of" in str(result)


def timing_with(median, iqr):
    return Timing("step", torch.device("cpu"), 1, median, median * 0.9, iqr, 6, 1)


def test_a_large_spread_warns_that_the_machine_was_busy():
    quiet, busy = timing_with(0.010, 0.001), timing_with(0.010, 0.006)
    assert not quiet.noisy and quiet.warning() == "" and "NOISY" not in str(quiet)
    assert busy.noisy and busy.spread == pytest.approx(0.6)
    assert "re-run on a quiet machine" in busy.warning() and "NOISY" in str(busy)


def test_a_steady_figure_is_noisy_when_the_timing_waited_for_a_cpu():
    """A consistent slowdown (every call slowed alike by other programs) has a small spread:
    the time the timing thread spent waiting for a CPU is what shows it."""
    steady = Timing("step", torch.device("cpu"), 1, 0.010, 0.009, 0.001, 6, 1, cpu_wait=0.35)
    assert steady.spread == pytest.approx(0.1) and steady.noisy
    assert "waited for a CPU during 35% of its run" in steady.warning()
    assert "a small spread cannot show that" in steady.warning() and "NOISY" in str(steady)
    both = Timing("step", torch.device("cpu"), 1, 0.010, 0.009, 0.006, 6, 1, cpu_wait=0.35)
    assert "spread over 60%" in both.warning() and "waited for a CPU during 35%" in both.warning()
    for unknown_or_small in (None, 0.02):
        quiet = Timing("step", torch.device("cpu"), 1, 0.010, 0.009, 0.001, 6, 1,
                       cpu_wait=unknown_or_small)
        assert not quiet.noisy and quiet.warning() == ""


def test_without_linuxs_schedstat_the_cpu_wait_is_unknown(monkeypatch, tmp_path):
    monkeypatch.setattr(timing, "_SCHEDSTAT", str(tmp_path / "absent"))
    result = timing.benchmark(lambda: None, "cpu", min_run_time=0.01)
    assert result.cpu_wait is None and result.waited is False


@pytest.mark.skipif(not (os.path.exists("/proc/thread-self/schedstat")
                         and hasattr(os, "sched_setaffinity")),
                    reason="needs Linux's per-thread schedstat and CPU affinity")
def test_a_program_competing_for_the_timing_threads_cpu_makes_the_figure_noisy():
    """The walkthrough's case: another program on the same core slows every call alike."""
    import subprocess
    import sys

    cpu = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    script = (f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\n"
              "end = time.time() + 20\nwhile time.time() < end: pass")
    rival = subprocess.Popen([sys.executable, "-c", script])
    os.sched_setaffinity(0, {cpu})
    try:
        time.sleep(0.2)  # the rival is running on that core
        result = timing.benchmark(lambda: sum(range(20000)), "cpu", threads=1, min_run_time=0.3)
    finally:
        os.sched_setaffinity(0, before)
        rival.kill()
        rival.wait()
    assert result.cpu_wait > timing.NOISY_CPU_WAIT and result.noisy, result


def test_sweep_points_carry_their_spread():
    points = matmul.matmul_sweep([8], "cpu", min_run_time=0.01)
    assert points[0].spread >= 0 and isinstance(points[0].noisy, bool)


def test_synchronized_clock_synchronises_the_device_before_reading(monkeypatch):
    events = []
    monkeypatch.setattr(timing, "synchronize", lambda device: events.append(("sync", device)))
    monkeypatch.setattr(timing.time, "perf_counter", lambda: events.append("read") or 1.5)
    clock = timing.synchronized_clock("cpu")
    assert clock() == 1.5
    assert events == [("sync", torch.device("cpu")), "read"]


@pytest.mark.parametrize("call, error, words", [
    (lambda: timing.benchmark(42, "cpu"), TypeError, ("fn must be a callable taking no arguments, "
                                                     "got int")),
    (lambda: timing.benchmark(print, "cpu", threads=0), ValueError, ("threads must be a positive "
                                                                    "whole number or None")),
    (lambda: timing.benchmark(print, "cpu", threads=True), ValueError, "got True"),
    (lambda: timing.benchmark(print, "cpu", min_run_time=0), ValueError, ("min_run_time must be a "
                                                                         "positive number")),
    (lambda: timing.benchmark(print, "gpu"), ValueError, "asks for device 'gpu'"),
    (lambda: timing.synchronized_clock("cuda:7"), ValueError, "Available here: "),
])
def test_bad_arguments_name_the_value_and_what_is_allowed(call, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        call()


# ------------------------------------------------------------------ the sweep

def test_matmul_flop_counts_multiplications_and_additions():
    assert matmul.matmul_flop(1) == 2 and matmul.matmul_flop(3) == 54


@pytest.mark.parametrize("size", [0, -4, 2.0, True, "8"])
def test_matmul_flop_rejects_what_is_not_a_size(size):
    with pytest.raises(ValueError, match=f"size must be a positive whole number, got {size!r}"):
        matmul.matmul_flop(size)


def test_matmul_point_computes_its_achieved_rate():
    point = MatmulPoint(size=100, device="cpu", dtype="float32", threads=1, seconds=0.002)
    assert point.flop == 2_000_000 and point.flop_per_s == pytest.approx(1e9)


def test_matmul_sweep_gives_one_point_per_size_in_order():
    points = matmul.matmul_sweep([4, 16], "cpu", threads=1, min_run_time=0.01)
    assert [p.size for p in points] == [4, 16]
    assert all(p.device == "cpu" and p.dtype == "float32" and p.threads == 1 for p in points)
    assert all(p.seconds > 0 and p.flop_per_s > 0 for p in points)


def test_matmul_sweep_in_float64():
    (point,) = matmul.matmul_sweep(range(8, 9), "cpu", dtype=torch.float64, min_run_time=0.01)
    assert point.dtype == "float64" and point.size == 8


@pytest.mark.parametrize("kwargs, words", [
    ({"sizes": []}, "sizes must be a non-empty list of positive whole numbers, got []"),
    ({"sizes": [16, 0]}, "got [16, 0]"),
    ({"sizes": "16"}, "got '16'"),
    ({"sizes": [8], "dtype": torch.int32}, ("dtype must be a floating-point torch.dtype such as "
                                           "torch.float32, got torch.int32")),
    ({"sizes": [8], "dtype": "float32"}, "got 'float32'"),
    ({"sizes": [8], "threads": -1}, "threads must be a positive whole number"),
    ({"sizes": [8], "min_run_time": "1"}, "min_run_time must be a positive number"),
])
def test_matmul_sweep_rejects_bad_arguments(kwargs, words):
    with pytest.raises(ValueError) as raised:
        matmul.matmul_sweep(device="cpu", **kwargs)
    assert words in str(raised.value)


# ------------------------------------------------------------------ peaks

@pytest.fixture
def a_cuda_gpu_named(monkeypatch):
    """Make the device checks see one CUDA GPU with the given name.

    torch.accelerator is patched too: on a CUDA build without a driver its own answers would
    initialise CUDA and raise "Found no NVIDIA driver".
    """
    def named(name):
        monkeypatch.setattr(torch.accelerator, "current_accelerator",
                            lambda check_available=False: torch.device("cuda"))
        monkeypatch.setattr(torch.accelerator, "current_device_index", lambda: 0)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    return named


@pytest.mark.parametrize("spec, peak", [(machines.CUDA, 67e12), (machines.XPU, None),
                                         (machines.MPS, None), (machines.CPU, None)])
def test_the_peak_is_looked_up_by_the_name_the_backend_gives(spec, peak):
    """A simulated H100 by its name; an XPU, a Mac or the CPU have no published figure here."""
    with SimulatedMachine(spec):
        found = matmul.peak_flop_per_s()
    assert (found and found.flop_per_s) == peak


@pytest.mark.parametrize("name, peak", [
    ("NVIDIA H100 80GB HBM3", 67e12),
    ("NVIDIA H100 PCIe", 51.2e12),
    ("NVIDIA H200", 67e12),
    ("NVIDIA A100-SXM4-40GB", 19.5e12),
    ("NVIDIA L40S", 91.6e12),
    ("NVIDIA L4", 30.3e12),
    ("Tesla T4", 8.1e12),
    ("NVIDIA GeForce RTX 4090", 82.6e12),
])
def test_known_gpus_have_their_published_float32_peak(a_cuda_gpu_named, name, peak):
    a_cuda_gpu_named(name)
    found = matmul.peak_flop_per_s("cuda")
    assert isinstance(found, PeakFigure) and found.flop_per_s == peak
    assert "datasheet" in found.source or "specifications" in found.source


def test_an_unknown_gpu_another_dtype_and_the_cpu_have_no_peak(a_cuda_gpu_named):
    a_cuda_gpu_named("NVIDIA GeForce RTX 3060")
    assert matmul.peak_flop_per_s("cuda") is None
    a_cuda_gpu_named("NVIDIA H100 80GB HBM3")
    assert matmul.peak_flop_per_s("cuda", torch.float16) is None
    assert matmul.peak_flop_per_s("cpu") is None


# ------------------------------------------------------------------ the plot

def test_plot_sweep_draws_time_and_rate_on_log_axes_with_a_legend():
    points = [MatmulPoint(n, "cpu", "float32", 1, 1e-6 * n) for n in (16, 32, 64)]
    figure = matmul.plot_sweep({"cpu": points, "cpu, again": points}, title="a title",
                               peak=PeakFigure(1e12, "a datasheet: dense FP32"))
    time_ax, rate_ax = figure.axes
    for ax in (time_ax, rate_ax):
        assert ax.get_xscale() == ax.get_yscale() == "log"
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
        assert ax.get_legend() is not None
    assert "(ms)" in time_ax.get_ylabel() and "GFLOP/s" in rate_ax.get_ylabel()
    assert [line.get_label() for line in rate_ax.lines] == ["cpu", "cpu, again",
                                                            "peak (a datasheet)"]
    assert figure._suptitle.get_text() == "a title"


@pytest.mark.parametrize("series", [{}, {"cpu": []}, {"cpu": [1, 2]}, [1]])
def test_plot_sweep_refuses_what_is_not_a_sweep(series):
    with pytest.raises(ValueError, match="a dict from labels to non-empty lists of MatmulPoint"):
        matmul.plot_sweep(series)


# ------------------------------------------------------------------ asynchronous work

def test_work_queue_returns_at_once_and_synchronize_waits():
    release, done = threading.Event(), []
    with timing.WorkQueue() as queue:
        queue.submit(lambda: (release.wait(5), done.append("first")))
        queue.submit(lambda: done.append("second"))
        assert queue.queued == 2 and done == []          # submit() did not wait
        release.set()
        queue.synchronize()
        assert done == ["first", "second"] and queue.queued == 0


def test_work_queue_raises_the_works_error_at_synchronize():
    with timing.WorkQueue() as queue:
        queue.submit(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            queue.synchronize()


def test_work_queue_takes_callables_only():
    with timing.WorkQueue() as queue, pytest.raises(TypeError, match="needs a callable, got int"):
        queue.submit(3)


# ------------------------------------------------------------------ on a CUDA GPU

@pytest.mark.gpu
def test_on_a_gpu_an_unsynchronised_clock_measures_only_the_launch():
    a = torch.randn(4096, 4096, device="cuda")
    a @ a
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(20):
        a @ a
    queued = time.perf_counter() - start
    torch.cuda.synchronize()
    finished = time.perf_counter() - start
    synced = timing.benchmark(lambda: a @ a, "cuda", min_run_time=0.1).median_s
    assert queued < finished / 2
    assert finished / 20 == pytest.approx(synced, rel=0.5)


@pytest.mark.gpu
def test_on_a_gpu_benchmark_agrees_with_cuda_events():
    a = torch.randn(2048, 2048, device="cuda")
    result = timing.benchmark(lambda: a @ a, "cuda", min_run_time=0.1)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        a @ a
    end.record()
    end.synchronize()
    assert result.median_s == pytest.approx(start.elapsed_time(end) / 20 / 1e3, rel=0.5)


@pytest.mark.gpu
def test_on_a_gpu_the_sweep_and_the_machine_line():
    points = matmul.matmul_sweep([64, 1024], "cuda", min_run_time=0.02)
    assert all(p.device.startswith("cuda") for p in points)
    assert points[1].flop_per_s > points[0].flop_per_s
    peak = matmul.peak_flop_per_s("cuda")
    assert peak is None or points[1].flop_per_s < 2 * peak.flop_per_s
