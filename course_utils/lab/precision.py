"""Mixed precision for lesson 06: which reduced dtype a device should use, and what it costs.

* :func:`amp_policy` -> :class:`AmpPolicy`: the autocast dtype and whether a ``GradScaler`` is
  needed, from what the device's backend computes natively (bfloat16 on the CPU, on CUDA GPUs
  with bfloat16 units, on MPS where it holds bfloat16; else float16 with a scaler);
* :func:`amp_step`: the course's device-agnostic mixed-precision training step;
* :func:`number_formats` -> :class:`NumberFormat`: range and precision of each format, from
  ``torch.finfo``; :func:`round_to_tf32`: the rounding TF32 matmuls apply to their inputs;
* :func:`measure_training` ->
  :class:`RunMeasurement`, :class:`Comparison`: speed, memory and accuracy, measured.

Device logic stays in :mod:`course_utils.lab.devices` (which device, how to wait for it) and
:mod:`course_utils.lab.backends` (what each type of device can do).
"""
from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from .args import positive_int
from .backends import backend_for
from .devices import resolve, synchronize
from .measure import SavedTensors

__all__ = ["AmpPolicy", "Comparison", "NumberFormat", "RunMeasurement", "amp_policy", "amp_step",
           "measure_training", "number_formats", "round_to_tf32"]

REDUCED = (torch.float16, torch.bfloat16)


# ------------------------------------------------------------------ the policy

@dataclass(frozen=True)
class AmpPolicy:
    """How to train in mixed precision on one device.

    ``device`` is the whole device (``cuda:1``, not just ``cuda``): the model, the batches and
    the memory counters of a run under this policy all live there. A device name is accepted
    and turned into a ``torch.device``. ``dtype`` is the autocast dtype (``torch.float32``
    means autocast off); ``use_scaler`` says whether the loss must be scaled (float16 only:
    its range is too small for gradients).
    """

    device: torch.device
    dtype: torch.dtype
    use_scaler: bool
    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.device, torch.device):
            object.__setattr__(self, "device", torch.device(self.device))

    @property
    def enabled(self) -> bool:
        return self.dtype != torch.float32

    def autocast(self) -> torch.autocast:
        """``torch.autocast`` for this policy; a no-op context when autocast is off."""
        return torch.autocast(self.device.type, dtype=self.dtype, enabled=self.enabled)

    def make_scaler(self) -> torch.amp.GradScaler:
        """A ``GradScaler`` that scales only where needed (disabled, its methods pass through)."""
        return torch.amp.GradScaler(self.device.type, enabled=self.use_scaler)


def amp_policy(device: str | torch.device | None = None, *, enabled: bool = True) -> AmpPolicy:
    """The mixed-precision policy for ``device`` (default :func:`~course_utils.get_device`).

    bfloat16 (no scaler) where the device's backend computes it natively
    (:mod:`course_utils.lab.backends`: the CPU, CUDA GPUs of compute capability 8.0+, MPS on
    macOS 14+, an XPU that reports it); float16 with a ``GradScaler`` on other accelerators.
    ``enabled=False`` gives the float32 baseline (autocast off, no scaler).
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"amp_policy: enabled must be True or False, got {enabled!r}.")
    device = resolve(device, "amp_policy")
    backend = backend_for(device)
    if not backend.computes:
        raise ValueError(f"amp_policy: no mixed-precision policy for device {str(device)!r}, "
                         "which holds shapes but no data; use 'cpu' or an accelerator.")
    if not enabled:
        return AmpPolicy(device, torch.float32, False, "autocast off: the float32 baseline")
    if backend.native_bf16(device):
        return AmpPolicy(device, torch.bfloat16, False, backend.bf16_because)
    return AmpPolicy(device, torch.float16, True, f"no native bfloat16 on this {device.type} "
                                                  "device: float16, with loss scaling")


def amp_step(model: torch.nn.Module, features: torch.Tensor, labels: torch.Tensor,
             loss_fn: Callable, optimizer: torch.optim.Optimizer,
             scaler: torch.amp.GradScaler, policy: AmpPolicy, max_norm: float | None = None
             ) -> float:
    """One training step under ``policy``; returns the batch's loss as a float.

    Forward and loss under autocast (autocast runs the loss in float32), backward outside
    it, gradients unscaled before clipping, and ``scaler.step`` so that a step whose
    gradients overflowed is skipped. With a disabled scaler every scaler call passes through.
    """
    optimizer.zero_grad(set_to_none=True)
    with policy.autocast():
        loss = loss_fn(model(features), labels)
    scaler.scale(loss).backward()
    if max_norm is not None:
        scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


# ------------------------------------------------------------------ number formats

@dataclass(frozen=True)
class NumberFormat:
    """Range and precision of one floating-point format, as ``torch.finfo`` reports them."""

    name: str
    bits: int
    exponent_bits: int
    mantissa_bits: int
    eps: float  # the gap between 1 and the next number: relative precision
    max: float
    smallest_normal: float
    smallest_subnormal: float  # anything smaller in size rounds to zero

    @classmethod
    def of(cls, dtype: torch.dtype) -> NumberFormat:
        if not isinstance(dtype, torch.dtype):
            raise TypeError(f"NumberFormat.of needs a torch dtype such as torch.float16, got "
                            f"{type(dtype).__name__} {dtype!r}.")
        if not dtype.is_floating_point:
            raise ValueError(f"NumberFormat.of needs a floating-point dtype such as "
                             f"torch.float16, got {dtype}.")
        info = torch.finfo(dtype)
        mantissa = round(-math.log2(info.eps))
        return cls(str(dtype).removeprefix("torch."), info.bits, info.bits - 1 - mantissa,
                   mantissa, info.eps, info.max, info.smallest_normal,
                   info.smallest_normal * info.eps)


def number_formats(dtypes: Iterable[torch.dtype] = (torch.float32, torch.float16,
                                                    torch.bfloat16)) -> list[NumberFormat]:
    """One :class:`NumberFormat` per dtype, in the order given."""
    return [NumberFormat.of(dtype) for dtype in dtypes]


def round_to_tf32(values: torch.Tensor) -> torch.Tensor:
    """``values`` (float32) rounded to TF32's 10 mantissa bits, to nearest, ties to even.

    This is what a TF32 matmul does to its inputs before multiplying them (and accumulating in
    float32); the result is still a float32 tensor. inf and nan are returned unchanged.
    """
    if not isinstance(values, torch.Tensor):
        raise TypeError(f"round_to_tf32 needs a float32 tensor, got {type(values).__name__}.")
    if values.dtype != torch.float32:
        raise ValueError(f"round_to_tf32 needs a float32 tensor, got {values.dtype}.")
    bits = values.contiguous().view(torch.int32)
    dropped = 13  # float32 has 23 mantissa bits, TF32 keeps 10
    keep_even = (bits >> dropped) & 1
    rounded = ((bits + (1 << (dropped - 1)) - 1 + keep_even) & ~((1 << dropped) - 1))
    return torch.where(torch.isfinite(values), rounded.view(torch.float32), values)


# ------------------------------------------------------------------ measuring



def _peak_memory(device: torch.device, reset: bool) -> int | None:
    """The accelerator's peak allocated bytes (after ``reset``: reset it); None where the
    device's backend keeps no peak (the CPU; MPS on older PyTorch)."""
    backend = backend_for(device)
    if reset:
        backend.reset_peak(device)
        return None
    reading = backend.memory(device)
    return None if reading is None else reading.peak_allocated


@dataclass(frozen=True)
class RunMeasurement:
    """What one training run in one precision measured."""

    label: str
    device: torch.device
    dtype: str
    steps: int
    seconds_per_step: float  # median over the steps after the first
    saved_bytes: int  # kept for backward by one step: activations and autocast's copies
    peak_bytes: int | None  # the accelerator's peak allocated memory; None on the CPU
    test_accuracy: float
    final_loss: float
    skipped_steps: int  # steps the GradScaler skipped because a gradient overflowed


@dataclass(frozen=True)
class Comparison:
    """A float32 run against a mixed-precision run of the same model, data and seed."""

    baseline: RunMeasurement
    amp: RunMeasurement

    @property
    def speedup(self) -> float:
        """Above 1: mixed precision is faster per step."""
        return self.baseline.seconds_per_step / self.amp.seconds_per_step

    @property
    def saved_bytes_ratio(self) -> float:
        """Below 1: mixed precision keeps fewer bytes for backward."""
        return self.amp.saved_bytes / self.baseline.saved_bytes

    @property
    def accuracy_change(self) -> float:
        return self.amp.test_accuracy - self.baseline.test_accuracy

    def table(self) -> str:
        """The two runs side by side, one line each."""
        header = (f"{'run':<22}{'ms/step':>9}{'saved KiB':>11}{'peak MiB':>10}{'accuracy':>10}"
                  f"{'skipped':>9}")
        lines = [header]
        for run in (self.baseline, self.amp):
            peak = "-" if run.peak_bytes is None else f"{run.peak_bytes / 2**20:.1f}"
            lines.append(f"{run.label:<22}{run.seconds_per_step * 1e3:>9.2f}"
                         f"{run.saved_bytes / 2**10:>11.0f}{peak:>10}"
                         f"{run.test_accuracy:>10.1%}{run.skipped_steps:>9}")
        return "\n".join(lines)


def measure_training(make_model: Callable[[], torch.nn.Module], train_batches: Iterable,
                     test_batches: Iterable, policy: AmpPolicy, epochs: int = 3,
                     lr: float = 1e-3, seed: int = 0, label: str | None = None
                     ) -> RunMeasurement:
    """Train ``make_model()`` with Adam under ``policy``; time, memory and accuracy.

    The batches must already be on the policy's device (e.g. ``data.TensorBatches``). Every
    step is timed with a synchronisation; the first (warm-up) step is not counted. The test
    accuracy is measured under the same autocast as training.
    """
    from .training import _accuracy

    if not isinstance(policy, AmpPolicy):
        raise TypeError(f"measure_training needs an AmpPolicy (from amp_policy()), got "
                         f"{type(policy).__name__}.")
    positive_int(epochs, "epochs", "measure_training")
    device = policy.device
    torch.manual_seed(seed)
    model = make_model().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scaler = policy.make_scaler()
    loss_fn = torch.nn.CrossEntropyLoss()

    features, labels = next(iter(train_batches))
    # A copy: a view (TensorBatches' slices) would hold, and count, the whole data set.
    batch = features.clone()
    with policy.autocast(), SavedTensors(exclude=model.parameters()) as saved_tensors:
        loss_fn(model(batch), labels)
    saved = saved_tensors.bytes_saved

    _peak_memory(device, reset=True)
    times, loss, skipped = [], math.nan, 0
    for _ in range(epochs):
        for features, labels in train_batches:
            scale = scaler.get_scale() if scaler.is_enabled() else None
            synchronize(device)
            start = time.perf_counter()
            loss = amp_step(model, features, labels, loss_fn, optimizer, scaler, policy)
            times.append(time.perf_counter() - start)  # .item() in amp_step waited for it
            skipped += int(scale is not None and scaler.get_scale() < scale)
    peak = _peak_memory(device, reset=False)
    with policy.autocast():
        accuracy = _accuracy(model, test_batches, device)
    dtype_name = str(policy.dtype).removeprefix("torch.")
    return RunMeasurement(label or (f"autocast {dtype_name}" if policy.enabled else "float32"),
                          device, dtype_name, len(times),
                          statistics.median(times[1:] or times), saved, peak, accuracy, loss,
                          skipped)
