"""Activation checkpointing, measured: saved bytes and step time with and without, in one run.

    .venv/bin/python benchmarks/memory.py [--repeats 20] [--batch 256]

The model is lesson 05's: 8 Linear layers of width 256 with GELU between them, cut into
1, 2, 4 or 8 checkpointed segments (torch.utils.checkpoint, use_reentrant=False). For each it
prints the activation bytes kept from the forward to the backward pass (saved_tensors_hooks),
the largest segment's activations (recomputed at once in the backward pass), and the step
time (the fastest block of timing.benchmark, which runs for 0.05 s x --repeats), as ratios to
the step without checkpointing.
Run it on an otherwise idle machine; it is a benchmark, not a test.
"""
from __future__ import annotations

import argparse
import itertools

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from course_utils import get_device, memory, report, timing


def deep_mlp(width: int = 256, depth: int = 8, classes: int = 10) -> nn.Sequential:
    layers: list[nn.Module] = []
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.GELU()]
    return nn.Sequential(*layers, nn.Linear(width, classes))


def segments_of(net: nn.Sequential, n_segments: int) -> list[nn.Sequential]:
    """n_segments consecutive pieces of net, each of whole layers (a Linear and its GELU)."""
    layers = (len(net) + 1) // 2
    bounds = [min(2 * round(i * layers / n_segments), len(net)) for i in range(n_segments + 1)]
    return [net[start:end] for start, end in itertools.pairwise(bounds)]


def forward(net: nn.Sequential, x: torch.Tensor, n_segments: int | None) -> torch.Tensor:
    if n_segments is None:
        return net(x)
    for segment in segments_of(net, n_segments):
        x = checkpoint(segment, x, use_reentrant=False)
    return x


def largest_segment_bytes(net: nn.Sequential, x: torch.Tensor, n_segments: int) -> int:
    """The activations of the largest segment, as the backward pass recomputes them."""
    largest = 0
    for segment in segments_of(net, n_segments):
        x, inside = memory.saved_for_backward(lambda s=segment, h=x: s(h), net.parameters())
        largest = max(largest, inside.activation_bytes)
    return largest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20, help="timed runs of each step")
    parser.add_argument("--batch", type=int, default=256, help="examples per batch")
    args = parser.parse_args()
    device = get_device()
    print(report.describe_machine(device))

    torch.manual_seed(0)
    net = deep_mlp().to(device)
    x = torch.randn(args.batch, 256, device=device)
    y = torch.randint(0, 10, (args.batch,), device=device)
    choices = [None, 1, 2, 4, 8]

    def step(n_segments):
        net.zero_grad(set_to_none=True)
        F.cross_entropy(forward(net, x, n_segments), y).backward()

    # The fastest block of each: on a busy machine, the least disturbed.
    seconds = {str(n): timing.benchmark(lambda n=n: step(n), device,
                                        min_run_time=0.05 * args.repeats).min_s
               for n in choices}
    _, plain = memory.saved_for_backward(lambda: forward(net, x, None), net.parameters())
    print(f"8-layer GELU MLP, width 256, batch {args.batch}; step time = fastest block "
          "of timing.benchmark")
    print(f"{'segments':>8} {'kept':>11} {'fewer kept':>11} {'+ recomputed':>13} "
          f"{'step':>10} {'time ratio':>11}")
    base = seconds["None"]
    print(f"{'none':>8} {memory.mib(plain.activation_bytes):>11} {'1.0x':>11} {'-':>13} "
          f"{base * 1e3:>7.1f} ms {'1.00x':>11}")
    for n_segments in choices[1:]:
        _, kept = memory.saved_for_backward(lambda n=n_segments: forward(net, x, n),
                                            net.parameters())
        recomputed = largest_segment_bytes(net, x, n_segments)
        took = seconds[str(n_segments)]
        print(f"{n_segments:>8} {memory.mib(kept.activation_bytes):>11} "
              f"{plain.activation_bytes / kept.activation_bytes:>10.1f}x "
              f"{memory.mib(recomputed):>13} {took * 1e3:>7.1f} ms {took / base:>10.2f}x")


if __name__ == "__main__":
    main()
