"""What each type of device can do: the course's one table of backend capabilities.

:mod:`course_utils.lab.devices` decides *which* device to use; this module answers what the
course asks of a device once it is chosen: its name in a printed figure, its memory counters,
whether it computes bfloat16 natively, whether ``torch.compile``'s Inductor can build code for
it. Each device type has one :class:`Backend` record, and :func:`backend_for` is the one lookup.

``GENERIC`` answers through ``torch.accelerator`` and the device type's own module
(``torch.xpu``, ...), so a type the table does not name (XPU, and whatever PyTorch adds next)
is served by it, and never mistaken for the CPU. ``cuda``, ``mps``, ``cpu`` and ``meta``
replace only the answers that differ. Adding a backend is one entry in ``BACKENDS`` and its
tests.
"""
from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

__all__ = ["BACKENDS", "GENERIC", "Backend", "CompilerStatus", "MemoryReading", "backend_for"]


@dataclass(frozen=True)
class MemoryReading:
    """The caching allocator's counters on one accelerator, in bytes."""

    device: str
    allocated: int  # held by live tensors
    reserved: int  # taken from the driver by PyTorch: allocated plus its cache
    peak_allocated: int | None  # the most allocated since the last reset_peak(); None if unknown


@dataclass(frozen=True)
class CompilerStatus:
    """Whether ``torch.compile``'s default backend (Inductor) can build code for a device."""

    ready: bool
    reason: str  # why not, and what to install; or what will compile


@dataclass(frozen=True)
class Backend:
    """The course's questions about one device type, each answered for a given device.

    Every answer takes the whole ``torch.device`` (``cuda:1``, not ``cuda``): two GPUs of one
    machine can differ (a T4 beside an A100).
    """

    device_type: str  # 'cuda', 'mps', 'cpu', 'meta'; '*' for GENERIC
    accelerator: bool  # its own memory and work queue (False: the CPU and 'meta')
    pinned_copies: bool  # page-locked host memory speeds copies to it (pin_memory=True)
    computes: bool  # False for 'meta': shapes without data, nothing to time, train or autocast
    display_name: Callable[[torch.device], str]  # for a printed figure: 'NVIDIA H100 80GB HBM3'
    memory: Callable[[torch.device], MemoryReading | None]  # None: no counters to read
    total_memory: Callable[[torch.device], int | None]  # bytes the device offers; None: unknown
    capability: Callable[[torch.device], tuple[int, int] | None]  # CUDA's (major, minor)
    multiprocessors: Callable[[torch.device], int | None]  # CUDA's SMs; None: not reported
    reset_peak: Callable[[torch.device], None]  # peak_allocated starts afresh (no-op: no peak)
    empty_cache: Callable[[torch.device], None]  # hand cached, unused blocks back to the driver
    native_bf16: Callable[[torch.device], bool]  # bfloat16 at full speed, no loss scaling needed
    bf16_because: str  # why native_bf16 is True, for amp_policy's reason
    compiler: Callable[[torch.device], CompilerStatus]  # can Inductor build code for it here?


# ------------------------------------------------------------------ the generic answers

def _module(device: torch.device):
    """``torch.xpu`` for an XPU: the device type's own module, or None."""
    return getattr(torch, device.type, None)


def _accelerator_index(device: torch.device) -> int | None:
    """The index ``torch.accelerator`` knows ``device`` by; None when it is another type."""
    current = torch.accelerator.current_accelerator(check_available=True)
    if current is None or current.type != device.type:
        return None
    return device.index if device.index is not None else torch.accelerator.current_device_index()


def _generic_name(device: torch.device) -> str:
    get_name = getattr(_module(device), "get_device_name", None)
    if callable(get_name):
        try:
            return str(get_name(device))
        except (RuntimeError, AssertionError, ValueError):  # a name is only informative
            pass
    return f"a {device.type} accelerator"


def _generic_memory(device: torch.device) -> MemoryReading | None:
    index = _accelerator_index(device)
    if index is None:
        return None
    try:
        return MemoryReading(str(device), torch.accelerator.memory_allocated(index),
                             torch.accelerator.memory_reserved(index),
                             torch.accelerator.max_memory_allocated(index))
    except (RuntimeError, NotImplementedError):  # a backend that does not count through it yet
        return None


def _generic_total_memory(device: torch.device) -> int | None:
    index = _accelerator_index(device)
    if index is None:
        return None
    try:
        return int(torch.accelerator.get_memory_info(index)[1])  # (free, total)
    except (RuntimeError, NotImplementedError, AttributeError):  # a PyTorch without it
        return None


def _generic_reset_peak(device: torch.device) -> None:
    index = _accelerator_index(device)
    if index is None:
        return
    try:
        torch.accelerator.reset_peak_memory_stats(index)
    except (RuntimeError, NotImplementedError):
        pass  # a backend that counts no peak has none to reset


def _generic_empty_cache(device: torch.device) -> None:
    if _accelerator_index(device) is not None:
        torch.accelerator.empty_cache()


def _generic_bf16(device: torch.device) -> bool:
    # torch.xpu.is_bf16_supported(including_emulation=False) and its kind ask the *current*
    # device, which get_device() makes the chosen one.
    is_supported = getattr(_module(device), "is_bf16_supported", None)
    if not callable(is_supported):
        return False
    try:
        return bool(is_supported(including_emulation=False))
    except TypeError:  # a backend whose function has no such argument
        return bool(is_supported())


def _triton(device: torch.device) -> CompilerStatus:
    from torch.utils._triton import has_triton

    if has_triton():
        return CompilerStatus(True, f"Inductor generates Triton kernels for {device}.")
    return CompilerStatus(False, f"Inductor needs Triton to generate kernels for {device}, and "
                                 "this installation has none usable (pip install triton on "
                                 "Linux; triton-windows on Windows).")


GENERIC = Backend(
    device_type="*", accelerator=True, pinned_copies=True, computes=True,
    display_name=_generic_name, memory=_generic_memory, total_memory=_generic_total_memory,
    capability=lambda device: None, multiprocessors=lambda device: None,
    reset_peak=_generic_reset_peak,
    empty_cache=_generic_empty_cache, native_bf16=_generic_bf16,
    bf16_because="this device reports native bfloat16 support", compiler=_triton)


# ------------------------------------------------------------------ CUDA (and ROCm)

def _cuda_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device)


def _cuda_total_memory(device: torch.device) -> int:
    return int(torch.cuda.get_device_properties(device).total_memory)


def _cuda_capability(device: torch.device) -> tuple[int, int]:
    return tuple(torch.cuda.get_device_capability(device))


def _cuda_multiprocessors(device: torch.device) -> int:
    return int(torch.cuda.get_device_properties(device).multi_processor_count)


def _cuda_bf16(device: torch.device) -> bool:
    # torch.cuda.is_bf16_supported() also says True on pre-Ampere GPUs (a T4), where bfloat16
    # is emulated and slow. Its including_emulation=False rule (ROCm GPUs: yes; NVIDIA: compute
    # capability 8.0+), asked of `device` rather than of the current GPU.
    return bool(torch.version.hip) or _cuda_capability(device) >= (8, 0)


CUDA = replace(GENERIC, device_type="cuda", display_name=_cuda_name,
               total_memory=_cuda_total_memory, capability=_cuda_capability,
               multiprocessors=_cuda_multiprocessors, native_bf16=_cuda_bf16,
               bf16_because="this GPU has bfloat16 units")


# ------------------------------------------------------------------ Apple's MPS

def _mps_memory(device: torch.device) -> MemoryReading | None:
    if _accelerator_index(device) is None:  # no usable MPS here
        return None
    reading = _generic_memory(device)
    if reading is not None:
        return reading
    # Older PyTorch: MPS counts through its own module, with no peak.
    return MemoryReading(str(device), torch.mps.current_allocated_memory(),
                         torch.mps.driver_allocated_memory(), None)


def _mps_total_memory(device: torch.device) -> int | None:
    try:
        return int(torch.mps.recommended_max_memory())
    except (RuntimeError, AttributeError):  # older macOS or PyTorch: not reported
        return None


def _mps_empty_cache(device: torch.device) -> None:
    torch.mps.empty_cache()


def _mps_holds_bf16(device: torch.device) -> bool:
    try:  # bfloat16 on MPS needs macOS 14 or newer
        torch.ones(1, dtype=torch.bfloat16, device=device)
    except (RuntimeError, TypeError):
        return False
    return True


def _metal(device: torch.device) -> CompilerStatus:
    return CompilerStatus(True, "Inductor generates Metal shaders for MPS (a prototype: expect "
                                "some operators to fall back).")


# Apple silicon's memory is shared by the CPU and the GPU: there is no copy for pinning to speed.
MPS = replace(GENERIC, device_type="mps", pinned_copies=False,
              display_name=lambda device: "Apple GPU (MPS)",
              memory=_mps_memory, total_memory=_mps_total_memory, empty_cache=_mps_empty_cache,
              native_bf16=_mps_holds_bf16, bf16_because="MPS holds bfloat16 (macOS 14+)",
              compiler=_metal)


# ------------------------------------------------------------------ the CPU and 'meta'

def _nothing(device: torch.device) -> None:
    return None


def _cpp_compiler(device: torch.device) -> CompilerStatus:
    from torch._inductor import config

    configured = config.cpp.cxx if isinstance(config.cpp.cxx, tuple) else (config.cpp.cxx,)
    names = [name for name in configured if name] or ["g++", "clang++"]
    found = next((shutil.which(name) for name in names if shutil.which(name)), None)
    if found:
        return CompilerStatus(True, f"Inductor generates C++ for the CPU and builds it with "
                                    f"{found}.")
    return CompilerStatus(False, "Inductor generates C++ for the CPU and needs a C++ compiler "
                                 f"to build it, but none of {names} is on PATH. Install one "
                                 "(Linux: g++; macOS: xcode-select --install; Windows: Visual "
                                 "Studio's C++ build tools, then run from a Developer prompt), "
                                 "or skip torch.compile on the CPU.")


CPU = Backend(
    device_type="cpu", accelerator=False, pinned_copies=False, computes=True,
    display_name=lambda device: "the CPU", memory=_nothing, total_memory=_nothing,
    capability=_nothing, multiprocessors=_nothing, reset_peak=_nothing, empty_cache=_nothing,
    # Autocast's CPU dtype: no loss scaling needed (its range is float32's).
    native_bf16=lambda device: True, bf16_because="the CPU autocasts to bfloat16",
    compiler=_cpp_compiler)

META = replace(
    CPU, device_type="meta", computes=False,
    display_name=lambda device: "PyTorch's meta device: shapes only, no data",
    native_bf16=lambda device: False, bf16_because="",
    compiler=lambda device: CompilerStatus(False, "the meta device computes nothing, so "
                                                  "there is no code to build for it."))


# ------------------------------------------------------------------ the table

BACKENDS: dict[str, Backend] = {backend.device_type: backend
                                for backend in (CUDA, MPS, CPU, META)}


def backend_for(device: torch.device | str) -> Backend:
    """The :class:`Backend` of ``device``'s type; ``GENERIC`` for a type the table does not
    name (XPU and newer accelerators)."""
    return BACKENDS.get(torch.device(device).type, GENERIC)
