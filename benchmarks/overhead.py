"""Removing overhead, measured: lesson 08's training step made faster step by step.

    .venv/bin/python benchmarks/overhead.py [--min-run-time 1.0]

On this machine's device (course_utils.get_device) it prints:

* the time to compile the step with torch.compile (its first call), apart from the steady state;
* the fastest time per training step (AdamW, lesson 08's MLP 64-256-10 with GELU,
  batch 256) of: eager with the for-loop AdamW, + fused AdamW, + torch.compile (Inductor), and on
  CUDA + CUDA graphs (mode="reduce-overhead"), each the median of timing.benchmark, with the
  speed-up over the first, the fastest block (the better guess on a busy machine) and
  timing.benchmark's warning where the machine was too busy;
* per AdamW step on 8 Linear(256, 256) layers: the bytes of new tensors it creates for
  foreach=False, foreach=True and fused=True (overhead.new_tensor_bytes, any device).

Without a compiler for Inductor (overhead.inductor_status) the compiled rows are skipped with the
reason. Run it on an otherwise idle machine; it is a benchmark, not a test.
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn

from course_utils import get_device, overhead, report, synchronize, timing


def make_model(device: torch.device) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 10)).to(device)


def training_step(net, optimizer, features, labels):
    def run():
        optimizer.zero_grad()
        F.cross_entropy(net(features), labels).backward()
        optimizer.step()
    return run


def step_variants(device: torch.device) -> tuple[dict, float | None]:
    """The steps to compare, and the compile time of the compiled one (None: not compiled)."""
    features = torch.randn(256, 64, device=device)
    labels = torch.randint(0, 10, (256,), device=device)
    plain, fused = make_model(device), make_model(device)
    variants = {
        "eager, for-loop AdamW": training_step(
            plain, torch.optim.AdamW(plain.parameters(), foreach=False), features, labels),
        "+ fused AdamW": training_step(
            fused, torch.optim.AdamW(fused.parameters(), fused=True), features, labels)}
    status = overhead.inductor_status(device)
    print(status.reason)
    if not status.ready:
        return variants, None
    compiled = torch.compile(fused)
    variants["+ torch.compile"] = training_step(
        compiled, torch.optim.AdamW(fused.parameters(), fused=True), features, labels)
    synchronize(device)
    started = time.perf_counter()
    variants["+ torch.compile"]()
    synchronize(device)
    compile_seconds = time.perf_counter() - started
    if device.type == "cuda":
        graphed = make_model(device)
        graphed_step = training_step(torch.compile(graphed, mode="reduce-overhead"),
                                     torch.optim.AdamW(graphed.parameters(), fused=True),
                                     features, labels)

        def graph_step():
            torch.compiler.cudagraph_mark_step_begin()
            graphed_step()
        for _ in range(3):
            graph_step()  # compile and record before timing
        variants["+ CUDA graphs (reduce-overhead)"] = graph_step
    return variants, compile_seconds


def optimizer_bytes(device: torch.device) -> dict[str, int]:
    found = {}
    for name, kwargs in {"foreach=False": {"foreach": False}, "foreach=True": {"foreach": True},
                         "fused=True": {"fused": True}}.items():
        torch.manual_seed(0)
        net = nn.Sequential(*[nn.Linear(256, 256) for _ in range(8)]).to(device)
        for parameter in net.parameters():
            parameter.grad = torch.randn_like(parameter)
        optimizer = torch.optim.AdamW(net.parameters(), **kwargs)
        optimizer.step()  # creates the state
        found[name] = overhead.new_tensor_bytes(optimizer.step)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-run-time", type=float, default=1.0,
                        help="seconds of timing per variant (default 1)")
    args = parser.parse_args()
    device = get_device()
    print("machine:", report.describe_machine(device))
    variants, compile_seconds = step_variants(device)
    if compile_seconds is not None:
        print(f"torch.compile, first call (compiling forward and backward): "
              f"{compile_seconds:.1f} s")
    measured = {name: timing.benchmark(step, device, min_run_time=args.min_run_time)
                for name, step in variants.items()}
    baseline = measured["eager, for-loop AdamW"].median_s
    print(f"{'training step, batch 256':<34}{'ms / step':>10}{'speed-up':>10}{'fastest':>10}")
    for name, timed in measured.items():
        print(f"{name:<34}{timed.median_s * 1e3:10.3f}{baseline / timed.median_s:9.2f}x"
              f"{timed.min_s * 1e3:10.3f}" + (f"  {timed.warning()}" if timed.noisy else ""))
    print("new tensors per AdamW step, 8 x Linear(256, 256) (2.0 MiB of parameters):")
    for name, value in optimizer_bytes(device).items():
        print(f"  {name:<14}{value / 2**20:6.1f} MiB")


if __name__ == "__main__":
    main()
