"""benchmarks/gpu_summary.py reads benchmarks/overhead.py's output into rows of its table."""
from __future__ import annotations

import importlib.util

from .conftest import ROOT


def load_summary():
    spec = importlib.util.spec_from_file_location("gpu_summary",
                                                  ROOT / "benchmarks" / "gpu_summary.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PRINTED = """\
machine: 16 CPU cores (Intel(R) Xeon(R) Processor), device cuda:0 (NVIDIA H200)
torch.compile, first call (compiling forward and backward): 1.2 s
training step, batch 256           ms / step  speed-up   fastest
eager, for-loop AdamW                  1.294     1.00x     1.250
+ fused AdamW                          0.823     1.57x     0.800
+ torch.compile                        1.505     0.86x     1.400  busy machine: re-run
+ CUDA graphs (reduce-overhead)        1.145     1.13x     1.100
new tensors per AdamW step, 8 x Linear(256, 256) (2.0 MiB of parameters):
  for-loop         4.0 MiB
"""


def test_overhead_rows_are_the_compile_time_and_each_step():
    """Checks the table gets the compile time and one row per step variant, not the header
    (which also says 'speed-up') nor the optimizer's memory lines."""
    rows = load_summary().overhead_rows(PRINTED)
    assert rows == [
        ("torch.compile, first call", "1.2 s"),
        ("step: eager, for-loop AdamW", "1.294 ms, 1.00x over eager"),
        ("step: + fused AdamW", "0.823 ms, 1.57x over eager"),
        ("step: + torch.compile", "1.505 ms, 0.86x over eager"),
        ("step: + CUDA graphs (reduce-overhead)", "1.145 ms, 1.13x over eager"),
    ]


def test_output_without_a_table_says_so():
    """Checks output without the step table is one row saying so, not an empty table."""
    assert load_summary().overhead_rows("machine: cpu\n") == [("overhead.py",
                                                               "printed no step times")]
