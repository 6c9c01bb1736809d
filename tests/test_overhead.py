"""course_utils.overhead: the graph counter, new-tensor bytes, trace summaries, compiler status."""
from __future__ import annotations

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from course_utils import backends, overhead


def test_graph_counter_counts_one_graph_per_compilation():
    def head(x):
        return (x * 2).relu().sum()
    torch._dynamo.reset()
    counter = overhead.GraphCounter()
    compiled = torch.compile(head, backend=counter, dynamic=False)
    for size in (3, 3, 5):
        assert compiled(torch.ones(size)).item() == 2 * size  # runs the captured graph as is
    assert counter.graphs == 2 and counter.ops_per_graph == [3, 3]
    torch._dynamo.reset()


def test_new_tensor_bytes_counts_new_tensors_not_in_place_results():
    x = torch.zeros(1000)
    assert overhead.new_tensor_bytes(lambda: x.add_(1)) == 0
    assert overhead.new_tensor_bytes(lambda: x + 1) == 4000
    assert overhead.new_tensor_bytes(lambda: (x + 1) * 2) == 8000


def test_fused_adamw_creates_no_temporaries_and_the_for_loop_does():
    found = {}
    for name, kwargs in {"loop": {"foreach": False}, "fused": {"fused": True}}.items():
        parameter = torch.nn.Parameter(torch.ones(256))
        parameter.grad = torch.ones(256)
        optimizer = torch.optim.AdamW([parameter], **kwargs)
        optimizer.step()
        found[name] = overhead.new_tensor_bytes(optimizer.step)
    assert found["fused"] == 0 < found["loop"]


def test_new_tensor_bytes_refuses_what_it_cannot_call():
    with pytest.raises(TypeError, match="a callable taking no arguments, got Tensor"):
        overhead.new_tensor_bytes(torch.ones(2))


def test_summarize_trace_counts_operators_and_the_reads_of_a_value(tmp_path):
    x = torch.ones(8)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            (x * 2).sum().item()
            with torch.profiler.record_function("logging"):
                float(x.sum())
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    summary = overhead.summarize_trace(tmp_path / "trace.json")
    assert summary.sync_points == {"aten::_local_scalar_dense (outside your ranges)": 3,
                                   "aten::_local_scalar_dense (in 'logging')": 3}
    assert summary.kernels == 0
    assert summary.operators >= 9 and summary.kernel_busy is None


def test_summarize_trace_names_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no trace file at .*nope.json"):
        overhead.summarize_trace(tmp_path / "nope.json")


def test_inductor_status_without_a_compiler_says_what_to_install(monkeypatch):
    monkeypatch.setattr(backends.shutil, "which", lambda name: None)
    status = overhead.inductor_status("cpu")
    assert not status.ready
    assert "needs a C++ compiler" in status.reason and "Visual Studio" in status.reason
    monkeypatch.setattr(backends.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert overhead.inductor_status(torch.device("cpu")).ready


@pytest.mark.gpu
def test_on_a_gpu_inductor_is_ready_and_a_trace_has_kernels_and_gaps(tmp_path):
    assert overhead.inductor_status("cuda").ready
    x = torch.ones(1 << 16, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            (x * 2).sum().item()
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    summary = overhead.summarize_trace(tmp_path / "trace.json")
    assert summary.kernels >= 10 and 0 < summary.kernel_busy < 1
    assert summary.sync_points["aten::_local_scalar_dense (outside your ranges)"] == 5


@pytest.mark.gpu
def test_on_a_gpu_the_foreach_adamw_peak_exceeds_the_fused_one():
    from course_utils import memory

    peaks = {}
    for name, kwargs in {"foreach": {"foreach": True}, "fused": {"fused": True}}.items():
        parameters = [torch.nn.Parameter(torch.ones(1 << 20, device="cuda")) for _ in range(4)]
        for parameter in parameters:
            parameter.grad = torch.ones_like(parameter)
        optimizer = torch.optim.AdamW(parameters, **kwargs)
        optimizer.step()
        torch.cuda.synchronize()
        before = memory.accelerator_memory("cuda").allocated
        memory.reset_peak("cuda")
        optimizer.step()
        peaks[name] = memory.accelerator_memory("cuda").peak_allocated - before
    assert peaks["fused"] < peaks["foreach"]


def test_step_cost_counts_operators_and_times_the_host_on_the_cpu():
    x = torch.ones(64)
    cost = overhead.step_cost(lambda: (x * 2 + 1).relu(), "cpu", calls=2, host_calls=3)
    assert cost.operators == 3  # mul, add, relu: per call, whatever the number of calls
    assert cost.launches is None and cost.kernels is None  # no GPU: nothing is launched
    assert 0 < cost.host_s < 1


def test_step_cost_refuses_what_it_cannot_use():
    with pytest.raises(TypeError, match="a callable taking no arguments, got Tensor"):
        overhead.step_cost(torch.ones(2), "cpu")
    with pytest.raises(ValueError, match="calls"):
        overhead.step_cost(lambda: None, "cpu", calls=0)
    with pytest.raises(ValueError, match="gpu"):
        overhead.step_cost(lambda: None, "gpu")


def load_benchmark():
    import importlib.util
    import sys

    from .conftest import ROOT

    spec = importlib.util.spec_from_file_location("overhead_benchmark",
                                                  ROOT / "benchmarks" / "overhead.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_benchmark_measures_every_row_a_cpu_can_run_and_says_why_not_the_others(capsys):
    """Checks benchmarks/overhead.py's CPU path without Inductor (no C++ build in the suite):
    the Dynamo-only and AOTAutograd rows are measured, the others say why they are skipped,
    and the summary is plain JSON."""
    import argparse
    import json

    bench = load_benchmark()
    args = argparse.Namespace(min_run_time=0.01, profile=True)
    status = overhead.CompilerStatus(False, "no compiler (test)")
    rows = bench.rows_for("MLP", torch.device("cpu"), args, status)
    measured = {row["row"]: row for row in rows if "ms" in row}
    assert set(measured) == {"eager, fused AdamW", "compile fwd+loss, backend=eager",
                             "compile fwd+loss, backend=aot_eager"}
    assert all(row["operators"] > 0 and row["host_ms"] > 0 for row in measured.values())
    skipped = {row["row"]: row["skipped"] for row in rows if "skipped" in row}
    assert skipped["compile whole step (+ optimizer)"].startswith("no Inductor here")
    assert skipped["whole step in one CUDA graph"] == "CUDA only (this is cpu)"
    summary = bench.summary(torch.device("cpu"), rows, [])
    assert json.loads(json.dumps(summary, allow_nan=False))["rows"][0]["row"] == (
        "eager, fused AdamW")
    printed = capsys.readouterr().out
    assert "skipped: CUDA only (this is cpu)" in printed
    torch._dynamo.reset()


@pytest.mark.gpu
def test_on_a_gpu_a_graph_replay_is_one_launch_for_several_kernels():
    x = torch.ones(1 << 10, device="cuda")

    def eager():
        return (x * 2 + 1).relu()
    for _ in range(3):
        eager()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        eager()
    by_hand, replayed = (overhead.step_cost(fn, "cuda", host_calls=3)
                         for fn in (eager, graph.replay))
    assert by_hand.launches == 3 and by_hand.kernels == 3
    assert replayed.launches == 1 and replayed.operators == 0


def test_step_cost_times_a_slow_step_a_few_times_only(monkeypatch):
    monkeypatch.setattr(overhead, "HOST_BUDGET_S", 0.0)
    calls = []
    overhead.step_cost(lambda: calls.append(1), "cpu", calls=2, host_calls=20)
    assert len(calls) == 3 + 2  # three timed calls (the least), then the two profiled ones
