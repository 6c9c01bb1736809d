"""What fills memory in a training step, how to measure it, and how to live with running out.

Lesson 05's helpers:

* :func:`estimate_training_memory` -- the formula: parameters, gradients, optimizer state and
  activations of a Linear/ReLU network, in a :class:`TrainingMemory` record;
* :func:`saved_for_backward` -- measure the bytes autograd keeps for the backward pass (any
  device, the CPU included) with ``torch.autograd.graph.saved_tensors_hooks``;
* :func:`accelerator_memory`, :func:`reset_peak` -- the caching allocator's allocated, reserved
  and peak bytes on a GPU, as the device's backend reads them (:mod:`course_utils.lab.backends`);
* :class:`SimulatedBudget` -- a memory budget that raises a real ``torch.OutOfMemoryError`` on
  the CPU, so out-of-memory handling can be shown and tested without a GPU;
* :func:`find_batch_size` -- halve the batch size until a step fits, recovering outside the
  ``except`` block;
"""
from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch.overrides import TorchFunctionMode

from .args import positive_int, whole_number
from .backends import MemoryReading, backend_for
from .devices import resolve
from .measure import SavedTensors

__all__ = [
    "OPTIMIZER_STATE_COPIES", "Attempt", "BatchSizeSearch", "MemoryReading", "SavedBytes",
    "SimulatedBudget", "TrainingMemory", "accelerator_memory", "estimate_training_memory",
    "find_batch_size", "memory_table", "mib", "release_cached_memory", "reset_peak",
    "saved_for_backward",
]

T = TypeVar("T")

# Tensors an optimizer keeps per parameter, each the parameter's size.
OPTIMIZER_STATE_COPIES = {"sgd": 0, "sgd_momentum": 1, "adam": 2, "adamw": 2}


def mib(n_bytes: float) -> str:
    """'12.34 MiB': bytes in mebibytes (2**20 bytes), the unit of PyTorch's memory messages."""
    return f"{n_bytes / 2**20:.2f} MiB"


# ------------------------------------------------------------------ the formula

@dataclass(frozen=True)
class TrainingMemory:
    """Bytes of one training step, by what occupies them."""

    parameters: int
    gradients: int
    optimizer_state: int
    activations: int

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer_state + self.activations

    def parts(self) -> list[tuple[str, int]]:
        """(name, bytes) for each part, then the total."""
        return [("parameters", self.parameters), ("gradients", self.gradients),
                ("optimizer state", self.optimizer_state), ("activations", self.activations),
                ("total", self.total)]


def memory_table(columns: Mapping[str, TrainingMemory]) -> str:
    """A text table with one column per record, in MiB: ``memory_table({"formula": e, ...})``."""
    names = list(columns)
    rows = [f"{'':<16}" + "".join(f"{name:>14}" for name in names)]
    for index, (part, _) in enumerate(next(iter(columns.values())).parts()):
        cells = "".join(f"{mib(columns[name].parts()[index][1]):>14}" for name in names)
        rows.append(f"{part:<16}{cells}")
    return "\n".join(rows)


def _leaf_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    return [module for module in model.modules() if not list(module.children())]


def estimate_training_memory(model: torch.nn.Module, batch_size: int,
                             optimizer: str = "adam") -> TrainingMemory:
    """The formula for a network of ``nn.Linear`` and ``nn.ReLU`` layers (in ``nn.Sequential``).

    parameters: every parameter's elements x bytes per element; gradients: the same again for
    trainable ones; optimizer state: ``OPTIMIZER_STATE_COPIES[optimizer]`` more copies (Adam
    keeps two running averages per parameter); activations: what autograd saves for the
    backward pass, per example: each Linear keeps its input, each ReLU its output, which is the
    next Linear's input and is counted once. The loss's few saved values are left out.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"estimate_training_memory needs an nn.Module, got {type(model).__name__}.")
    positive_int(batch_size, "batch_size", "estimate_training_memory")
    if optimizer not in OPTIMIZER_STATE_COPIES:
        raise ValueError(f"optimizer must be one of {sorted(OPTIMIZER_STATE_COPIES)}, "
                         f"got {optimizer!r}.")
    params = list(model.parameters())
    if not params:
        raise ValueError("the model has no parameters, so there is nothing to train.")
    parameter_bytes = sum(p.numel() * p.element_size() for p in params)
    trainable = sum(p.numel() * p.element_size() for p in params if p.requires_grad)

    values_per_example, width, output_saved = 0, None, False
    for layer in _leaf_layers(model):
        if isinstance(layer, torch.nn.Linear):
            if not output_saved:  # else the ReLU before it already saved this input
                values_per_example += layer.in_features
            width, output_saved = layer.out_features, False
        elif isinstance(layer, torch.nn.ReLU):
            if width is None:
                raise ValueError("the formula needs a Linear layer before each ReLU.")
            values_per_example += 0 if output_saved else width
            output_saved = True
        else:
            raise TypeError(
                f"the formula covers nn.Linear and nn.ReLU layers, not {type(layer).__name__}; "
                "measure other models with saved_for_backward().")
    activations = batch_size * values_per_example * params[0].element_size()
    state = OPTIMIZER_STATE_COPIES[optimizer] * trainable
    return TrainingMemory(parameter_bytes, trainable, state, activations)


# ------------------------------------------------------------------ measuring

@dataclass(frozen=True)
class SavedBytes:
    """What autograd kept for the backward pass, counted once per storage."""

    activation_bytes: int  # storages the forward pass made (inputs included unless excluded)
    parameter_bytes: int  # saved storages of ``exclude`` (Linear saves its weight): not new
    count: int  # distinct storages saved, the parameters' included


def saved_for_backward(forward: Callable[[], T], exclude: Iterable[torch.Tensor] = ()
                       ) -> tuple[T, SavedBytes]:
    """Run ``forward()`` and measure what autograd saves for its backward pass.

    Returns ``(forward's result, SavedBytes)``: the one-call form of
    :class:`course_utils.lab.measure.SavedTensors`, with its counting rule (each storage
    once, whole). Saved tensors that share storage with ``exclude`` (the model's
    parameters) count as parameter bytes.
    """
    if not callable(forward):
        raise TypeError(f"saved_for_backward needs a function to call, got "
                        f"{type(forward).__name__}; wrap the step in a lambda.")
    with SavedTensors(exclude=exclude) as saved:
        result = forward()
    return result, SavedBytes(saved.bytes_saved, saved.bytes_excluded,
                              saved.storages_saved + saved.storages_excluded)


def _accelerator(device, function: str) -> torch.device:
    device = resolve(device, function)
    if not backend_for(device).accelerator:
        raise ValueError(f"{function}: device {str(device)!r} has no caching allocator to read: "
                         "PyTorch keeps memory statistics for accelerators (cuda, mps, xpu, "
                         "...). On the CPU, measure with saved_for_backward().")
    return device


def accelerator_memory(device=None) -> MemoryReading:
    """Allocated, reserved and peak bytes on an accelerator (ValueError for the CPU).

    ``device`` defaults to :func:`~course_utils.lab.devices.get_device`. Read through the
    device's backend (:mod:`course_utils.lab.backends`): ``torch.accelerator``'s counters, or
    the backend's own where it does not report through them yet (MPS, without a peak).
    """
    device = _accelerator(device, "accelerator_memory")
    reading = backend_for(device).memory(device)
    if reading is None:
        raise ValueError(f"accelerator_memory: no memory statistics are known for device "
                         f"{str(device)!r} here.")
    return reading


def reset_peak(device=None) -> None:
    """Start the peak (``peak_allocated``) afresh from what is allocated now.

    ``device`` defaults to :func:`~course_utils.lab.devices.get_device`; a backend that keeps
    no peak has nothing to reset.
    """
    device = _accelerator(device, "reset_peak")
    backend_for(device).reset_peak(device)


def release_cached_memory(device=None) -> None:
    """Collect Python garbage, then hand the accelerator's unused cached blocks back.

    Frees nothing that a live tensor still uses. ``device`` defaults to nothing: without one,
    or on the CPU, only the garbage collection runs.
    """
    gc.collect()
    if device is None:
        return
    device = resolve(device, "release_cached_memory")
    backend_for(device).empty_cache(device)


# ------------------------------------------------------------------ a budget on the CPU

class SimulatedBudget(TorchFunctionMode):
    """A pretend device with ``limit`` bytes, for out-of-memory demonstrations on the CPU.

    Inside ``with SimulatedBudget(limit):`` every tensor that a torch function returns is
    charged while any tensor using its storage is alive (as an allocator would hold it).
    When the live total passes ``limit``, a real ``torch.OutOfMemoryError`` is raised.
    Tensors made before the block, and the gradients that backward() makes, are not charged.
    """

    def __init__(self, limit: int):
        super().__init__()
        whole_number(limit, "limit (bytes)", "SimulatedBudget")
        self.limit = limit
        self.peak = 0
        self._storages: dict[int, tuple[int, list[weakref.ref]]] = {}

    @property
    def used(self) -> int:
        """Bytes held now by tensors made inside the block."""
        total = 0
        for pointer, (n_bytes, refs) in list(self._storages.items()):
            alive = [ref for ref in refs if ref() is not None]
            if alive:
                self._storages[pointer] = (n_bytes, alive)
                total += n_bytes
            else:
                del self._storages[pointer]
        return total

    def _charge(self, tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        pointer = storage.data_ptr()
        entry = self._storages.get(pointer)
        if entry is None or not any(ref() is not None for ref in entry[1]):
            entry = self._storages[pointer] = (storage.nbytes(), [])  # new, or a reused address
        entry[1].append(weakref.ref(tensor))

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        outputs = result if isinstance(result, (tuple, list)) else (result,)
        for output in outputs:
            if isinstance(output, torch.Tensor) and output.device.type != "meta":
                self._charge(output)
        used = self.used
        self.peak = max(self.peak, used)
        if used > self.limit:
            name = getattr(func, "__name__", "an operation")
            raise torch.OutOfMemoryError(
                f"Simulated out of memory: {name} needed memory that the budget does not "
                f"have. {mib(used)} would be in use, of a budget of {mib(self.limit)}.")
        return result


# ------------------------------------------------------------------ the batch-size finder

@dataclass(frozen=True)
class Attempt:
    batch_size: int
    fitted: bool


@dataclass(frozen=True)
class BatchSizeSearch:
    """The largest batch size that fitted, and every size tried, in order."""

    batch_size: int
    attempts: tuple[Attempt, ...]


def find_batch_size(step: Callable[[int], Any], start: int, device=None,
                    minimum: int = 1) -> BatchSizeSearch:
    """Halve the batch size from ``start`` until ``step(batch_size)`` runs without OOM.

    Only ``torch.OutOfMemoryError`` means "too big"; any other error is a bug and propagates.
    The retry happens after the ``except`` block: while the block runs, the exception's
    traceback still holds the failed step's frames and, through them, its tensors. With
    ``device``, garbage is collected and the device's cache emptied between attempts. When
    even ``minimum`` fails, the last out-of-memory error propagates.
    """
    if not callable(step):
        raise TypeError(f"step must be a function of the batch size, got {type(step).__name__}.")
    positive_int(start, "start", "find_batch_size")
    positive_int(minimum, "minimum", "find_batch_size")
    if minimum > start:
        raise ValueError(f"minimum ({minimum}) must not be larger than start ({start}).")
    attempts: list[Attempt] = []
    batch_size = start
    while True:
        try:
            step(batch_size)
        except torch.OutOfMemoryError:
            if batch_size // 2 < minimum:
                raise  # nothing smaller to try: the caller sees the real error
        else:
            attempts.append(Attempt(batch_size, True))
            return BatchSizeSearch(batch_size, tuple(attempts))
        # Out of memory. Recover here, after the except block: inside it, the exception's
        # traceback still held the failed step's frames and, through them, its tensors.
        attempts.append(Attempt(batch_size, False))
        if device is not None:
            release_cached_memory(device)
        batch_size //= 2
