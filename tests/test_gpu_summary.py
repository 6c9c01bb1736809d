"""benchmarks/gpu_summary.py reads benchmarks/overhead.py's JSON summary into rows of its table."""
from __future__ import annotations

import importlib.util
import json

from .conftest import ROOT


def load_summary():
    spec = importlib.util.spec_from_file_location("gpu_summary",
                                                  ROOT / "benchmarks" / "gpu_summary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SUMMARY = {"benchmark": "overhead", "device": "cuda:0", "rows": [
    {"workload": "residual", "row": "eager, fused AdamW", "ms": 2.0, "noisy": False},
    {"workload": "residual", "row": "whole step, mode=reduce-overhead", "ms": 0.8,
     "noisy": False, "cudagraph_skips": 0},
    {"workload": "residual", "row": "whole step in one CUDA graph", "ms": 0.5, "noisy": True},
    {"workload": "MLP", "row": "whole step, mode=reduce-overhead", "ms": 1.0,
     "cudagraph_skips": 2},
    {"workload": "MLP", "row": "whole step in one CUDA graph", "skipped": "CUDA only (cpu)"},
]}
PRINTED = ("machine: 16 CPU cores, device cuda:0 (NVIDIA H200)\n"
           "  eager, fused AdamW      2.000   1.00x\n"
           "{not json\n" + json.dumps(SUMMARY) + "\n")


def test_overhead_rows_are_each_measured_step_with_its_speed_up_and_caveats():
    """Checks one row per measured step (skipped ones left out), the speed-up over its own
    workload's eager row, the graph verdict of reduce-overhead rows and the noise flag."""
    rows = load_summary().overhead_rows(PRINTED)
    assert rows == [
        ("step, residual: eager, fused AdamW", "2.000 ms, 1.00x over eager"),
        ("step, residual: whole step, mode=reduce-overhead",
         "0.800 ms, 2.50x over eager, graphed"),
        ("step, residual: whole step in one CUDA graph", "0.500 ms, 4.00x over eager (noisy)"),
        ("step, MLP: whole step, mode=reduce-overhead",
         "1.000 ms, NOT graphed (2 cudagraph skips)"),
    ]


def test_output_without_a_summary_says_so():
    """Checks output without the JSON line is one row saying so, not an empty table."""
    summary = load_summary()
    assert summary.overhead_rows("machine: cpu\n{}\n") == [("overhead.py",
                                                             "printed no JSON summary")]
    assert summary.overhead_rows(json.dumps({"benchmark": "overhead", "rows": []})) == [
        ("overhead.py", "measured no step")]
