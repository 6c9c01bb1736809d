"""The matrix-size sweep of lesson 03: ``a @ b`` timed for square matrices of each size.

* :func:`matmul_sweep` -- one :class:`MatmulPoint` per size (time and achieved FLOP/s), each
  timed as :func:`course_utils.lab.timing.benchmark` times a call (synchronised, warmed up, the
  median of several blocks);
* :func:`plot_sweep` -- time and rate against size on log axes, one line per series;
* :func:`peak_flop_per_s` -- a vendor's published peak for known GPUs, else None, to draw
  beside the achieved rate.

Where the lines cross (the crossover) is lesson 03's exercise: nothing here computes it.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from .args import is_whole, positive_int, seconds
from .backends import backend_for
from .devices import resolve
from .timing import NOISY_SPREAD, thread_count, time_statement

__all__ = ["MatmulPoint", "PeakFigure", "matmul_flop", "matmul_sweep", "peak_flop_per_s",
           "plot_sweep"]


def matmul_flop(size: int) -> int:
    """Floating-point operations of ``a @ b`` for two size x size matrices: 2 * size**3.

    Each of the size**2 outputs is a dot product of length size: size multiplications and
    size additions (counted as size, as is usual).
    """
    return 2 * positive_int(size, "size", "matmul_flop")**3


@dataclass(frozen=True)
class MatmulPoint:
    """One point of a sweep: ``a @ b`` for size x size matrices, and how long it took."""

    size: int
    device: str
    dtype: str  # 'float32'
    threads: int
    seconds: float  # median per multiplication
    spread: float = 0.0  # IQR / median of the blocks (Timing.spread)

    @property
    def noisy(self) -> bool:
        """The spread says the machine was busy while this size was timed."""
        return self.spread > NOISY_SPREAD

    @property
    def flop(self) -> int:
        return matmul_flop(self.size)

    @property
    def flop_per_s(self) -> float:
        """Achieved floating-point operations per second: work done / time measured."""
        return self.flop / self.seconds


def matmul_sweep(sizes: Sequence[int], device=None, *, dtype: torch.dtype = torch.float32,
                 threads: int | None = None, min_run_time: float = 0.05) -> list[MatmulPoint]:
    """Time ``a @ b`` for square matrices of each size on ``device`` (default
    :func:`get_device`); one record per size.

    Each size is timed like :func:`benchmark` (warm-up, synchronised clock, median of at
    least ``min_run_time`` seconds of runs). The matrices are drawn from a seeded generator.
    """
    device = resolve(device, "matmul_sweep")
    threads = thread_count(threads, "matmul_sweep")
    min_run_time = seconds(min_run_time, "min_run_time", "matmul_sweep")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"matmul_sweep: dtype must be a floating-point torch.dtype such as "
                         f"torch.float32, got {dtype!r}.")
    sizes = list(sizes) if isinstance(sizes, (list, tuple, range)) else sizes
    if not isinstance(sizes, list) or not sizes or any(
            not is_whole(n) or n < 1 for n in sizes):
        raise ValueError(f"matmul_sweep: sizes must be a non-empty list of positive whole "
                         f"numbers, got {sizes!r}.")
    generator = torch.Generator().manual_seed(0)
    points = []
    for size in sizes:
        # Drawn on the CPU, so every device multiplies the same matrices, then moved once.
        a, b = (torch.randn(size, size, generator=generator, dtype=dtype).to(device)
                for _ in range(2))
        timing = time_statement("a @ b", {"a": a, "b": b}, device, f"{size}x{size}", threads,
                          min_run_time)
        points.append(MatmulPoint(size=size, device=str(device),
                                  dtype=str(dtype).removeprefix("torch."), threads=threads,
                                  seconds=timing.median_s, spread=timing.spread))
    return points


@dataclass(frozen=True)
class PeakFigure:
    """A device's peak FLOP/s as its vendor publishes it (not measured here)."""

    flop_per_s: float
    source: str


# NVIDIA datasheets, dense FP32 on the CUDA cores: what a float32 matmul can use when TF32 is
# off (PyTorch's default). Most specific names first ("L40S" before "L4").
_FP32_PEAKS = (
    (r"H100.*PCIe", 51.2e12, "NVIDIA H100 PCIe datasheet"),
    (r"H100.*NVL", 60e12, "NVIDIA H100 NVL datasheet"),
    (r"H100", 67e12, "NVIDIA H100 SXM datasheet"),
    (r"H200.*NVL", 60e12, "NVIDIA H200 NVL datasheet"),
    (r"H200", 67e12, "NVIDIA H200 SXM datasheet"),
    (r"A100", 19.5e12, "NVIDIA A100 datasheet"),
    (r"L40S", 91.6e12, "NVIDIA L40S datasheet"),
    (r"\bL4\b", 30.3e12, "NVIDIA L4 datasheet"),
    (r"\bT4\b", 8.1e12, "NVIDIA T4 datasheet"),
    (r"RTX 4090", 82.6e12, "NVIDIA GeForce RTX 4090 specifications"),
)


def peak_flop_per_s(device=None, dtype: torch.dtype = torch.float32) -> PeakFigure | None:
    """The published float32 peak of a known NVIDIA GPU ``device`` (default :func:`get_device`),
    or None when it is not known here.

    None for the CPU, MPS, other dtypes and GPUs not in the table: say so rather than guess.
    The GPU is recognised by the name its backend gives it (:mod:`course_utils.lab.backends`).
    """
    device = resolve(device, "peak_flop_per_s")
    if dtype != torch.float32:
        return None
    name = backend_for(device).display_name(device)
    for pattern, peak, source in _FP32_PEAKS:
        if re.search(pattern, name):
            return PeakFigure(peak, f"{source}: dense FP32, without tensor cores")
    return None


def plot_sweep(series: Mapping[str, Sequence[MatmulPoint]], title: str = "a @ b, square matrices",
               peak: PeakFigure | None = None):
    """Time and achieved FLOP/s against matrix size, log axes, one line per series.

    ``series`` maps a legend label ("cpu, 1 thread") to the points of one sweep. Returns the
    Figure (closed in pyplot, so a notebook shows it once, as the cell's value).
    """
    if not isinstance(series, Mapping) or not series or not all(
            points and all(isinstance(p, MatmulPoint) for p in points)
            for points in series.values()):
        raise ValueError("plot_sweep needs a dict from labels to non-empty lists of MatmulPoint "
                         "(what matmul_sweep returns).")
    import matplotlib.pyplot as plt

    fig, (time_ax, rate_ax) = plt.subplots(1, 2, figsize=(10, 3.8))
    for label, points in series.items():
        sizes = [p.size for p in points]
        time_ax.plot(sizes, [p.seconds * 1e3 for p in points], marker="o", label=label)
        rate_ax.plot(sizes, [p.flop_per_s / 1e9 for p in points], marker="o", label=label)
    if peak is not None:
        rate_ax.axhline(peak.flop_per_s / 1e9, color="gray", linestyle="--",
                        label=f"peak ({peak.source.split(':')[0]})")
    time_ax.set(xscale="log", yscale="log", xlabel="matrix size n (n x n)",
                ylabel="time per a @ b (ms)", title="Time")
    rate_ax.set(xscale="log", yscale="log", xlabel="matrix size n (n x n)",
                ylabel="achieved GFLOP/s", title="Achieved FLOP/s (2n³ / time)")
    for ax in (time_ax, rate_ax):
        ax.grid(alpha=0.3, which="both")
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    plt.close(fig)
    return fig
