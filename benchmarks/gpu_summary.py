"""The course's GPU figures in one table, from one run: what README's GPU column quotes.

    python benchmarks/gpu_summary.py          (make gpu-check runs it)

On a CUDA device it measures, each figure the median of warmed-up, synchronised runs
(course_utils.timing.benchmark):

* the source's training step (lesson 03: MLP 1024-2048-512-10, batch 128, Adam) on the CPU and
  on the GPU, and their ratio;
* the matmul crossover: from which size on (float32, square) the GPU stays faster than the CPU;
* a large bf16 matmul's achieved TFLOP/s against the device's published dense bf16 peak;
* the speed-up of autocast over float32 for a training step of benchmarks/mixed_precision.py's
  wide MLP;
* lesson 08's closing comparison (eager, compiled, reduce-overhead, one whole-step CUDA graph on
  two workloads), from the JSON summary line that benchmarks/overhead.py prints last.

Without a CUDA device it says so and exits 0. A benchmark, not a test: run it on an idle machine.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from course_utils import matmul, report, timing

HERE = Path(__file__).resolve().parent
SWEEP = [64, 128, 256, 512, 1024, 2048, 4096]
LARGE = 8192
# NVIDIA datasheets, dense BF16 on the tensor cores (without sparsity). Most specific first.
BF16_PEAKS = (
    (r"H100.*PCIe", 756e12), (r"H100.*NVL", 835e12), (r"H100", 989e12),
    (r"H200.*NVL", 835e12), (r"H200", 989e12), (r"A100", 312e12), (r"L40S", 362e12),
    (r"\bL4\b", 121e12), (r"RTX 4090", 165e12),
)


def source_step(device: torch.device):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 512), nn.ReLU(),
                          nn.Linear(512, 10)).to(device)
    optimizer = torch.optim.Adam(model.parameters())
    data, target = torch.randn(128, 1024, device=device), torch.randint(0, 10, (128,),
                                                                         device=device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(data), target).backward()
        optimizer.step()
    return step


def wide_step(device: torch.device, amp: bool):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 256)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.0)  # same work every step
    features = torch.randn(256, 256, device=device)
    labels = torch.randint(0, 256, (256,), device=device)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss = F.cross_entropy(model(features), labels)
        loss.backward()
        optimizer.step()
    return step


def seconds(fn, device: torch.device) -> float:
    return timing.benchmark(fn, device, min_run_time=0.3).median_s


def crossover(gpu: torch.device) -> str:
    cpu = matmul.matmul_sweep(SWEEP, "cpu", min_run_time=0.1)
    fast = matmul.matmul_sweep(SWEEP, gpu, min_run_time=0.1)
    found = None
    for slow_point, fast_point in zip(cpu, fast, strict=True):
        found = (found or slow_point.size) if fast_point.seconds < slow_point.seconds else None
    return f"from {found}x{found} on" if found else f"not within {SWEEP[-1]}"


def bf16_row(gpu: torch.device) -> tuple[str, str]:
    a, b = (torch.randn(LARGE, LARGE, device=gpu, dtype=torch.bfloat16) for _ in range(2))
    achieved = matmul.matmul_flop(LARGE) / seconds(lambda: a @ b, gpu)
    name = torch.cuda.get_device_name(gpu)
    peak = next((value for pattern, value in BF16_PEAKS if re.search(pattern, name)), None)
    against = (f"{achieved / peak:.0%} of the {peak / 1e12:.0f} TFLOP/s datasheet peak"
               if peak else "no published peak known here for this GPU")
    return f"bf16 matmul {LARGE}x{LARGE}", f"{achieved / 1e12:.0f} TFLOP/s, {against}"


def compile_rows() -> list[tuple[str, str]]:
    """overhead.py's rows: each step's time and speed-up over its workload's eager step."""
    script = HERE / "overhead.py"
    if not script.exists():
        return [("overhead.py", "benchmarks/overhead.py not present")]
    result = subprocess.run([sys.executable, str(script)], check=False, capture_output=True,
                            text=True)
    if result.returncode:
        return [("overhead.py", f"FAILED, exit {result.returncode}")]
    return overhead_rows(result.stdout)


def overhead_rows(printed: str) -> list[tuple[str, str]]:
    """The rows of overhead.py's JSON summary (its last line that is one): each measured step's
    time, speed-up over its workload's eager row, and what may make the figure wrong."""
    found = None
    for line in printed.splitlines():
        if line.startswith("{"):
            try:
                parsed = json.loads(line)
            except ValueError:
                continue
            if isinstance(parsed, dict) and parsed.get("benchmark") == "overhead":
                found = parsed
    if found is None:
        return [("overhead.py", "printed no JSON summary")]
    eager = {row["workload"]: row["ms"] for row in found.get("rows", [])
             if row.get("row") == "eager, fused AdamW" and "ms" in row}
    rows = []
    for row in found.get("rows", []):
        if "ms" not in row:
            continue
        value = f"{row['ms']:.3f} ms"
        if eager.get(row["workload"]):
            value += f", {eager[row['workload']] / row['ms']:.2f}x over eager"
        if "reduce-overhead" in row["row"]:
            skips = row.get("cudagraph_skips", 0)
            value += ", graphed" if skips == 0 else f", NOT graphed ({skips} cudagraph skips)"
        if row.get("noisy"):
            value += " (noisy)"
        rows.append((f"step, {row['workload']}: {row['row']}", value))
    return rows or [("overhead.py", "measured no step")]


def main() -> int:
    if not torch.cuda.is_available():
        reason = ("a CPU-only build of PyTorch" if torch.version.cuda is None
                  else "no NVIDIA GPU or driver")
        print(f"GPU figures: no GPU ({reason}); nothing measured.")
        return 0
    gpu, cpu = torch.device("cuda:0"), torch.device("cpu")
    print(f"machine: {report.describe_machine(gpu)}")
    cpu_step, gpu_step = seconds(source_step(cpu), cpu), seconds(source_step(gpu), gpu)
    fp32, amp = seconds(wide_step(gpu, False), gpu), seconds(wide_step(gpu, True), gpu)
    rows = [
        ("source's MLP step, CPU / GPU", (f"{cpu_step * 1e3:.2f} ms / {gpu_step * 1e3:.3f} ms "
                                          f"= {cpu_step / gpu_step:.1f}x")),
        ("matmul crossover (float32)", f"the GPU stays faster {crossover(gpu)}"),
        bf16_row(gpu),
        ("AMP (bf16 autocast) speed-up", (f"{fp32 / amp:.2f}x on the wide MLP step "
                                          f"({fp32 * 1e3:.3f} -> {amp * 1e3:.3f} ms)")),
        *compile_rows(),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"| {'figure':<{width}} | {torch.cuda.get_device_name(gpu)} |")
    print(f"|{'-' * (width + 2)}|---|")
    for name, value in rows:
        print(f"| {name:<{width}} | {value} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
