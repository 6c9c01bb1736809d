"""Choosing the device to train on: the course's one place that decides which device.

Every notebook and helper asks :func:`get_device` (a helper's ``device`` argument goes through
:func:`resolve`); nothing else in the course decides between CUDA, MPS, XPU and the CPU. What
each type of device *can do* once chosen is :mod:`course_utils.lab.backends`' table.

An accelerator is always returned with its index (``cuda:0``, ``mps:0``), the way a tensor
created on it reports its device, so that ``x.device == get_device()`` holds for a tensor made
or moved there.
"""
from __future__ import annotations

import difflib
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

ENV_VAR = "COURSE_DEVICE"

# PyTorch 2.11's profiler warns "Profiler clears events at the end of each cycle" at every
# first profile (it checks after making the profiler it checks for; 2.13 checks before): no
# lesson's concern, so that one message is hidden on those versions, for every notebook.
if torch.__version__ < "2.13":
    warnings.filterwarnings("ignore", message="Warning: Profiler clears events at the end",
                            category=UserWarning)


@dataclass(frozen=True)
class DeviceChoice:
    """The device :func:`explain_device` picked and the reason, in words."""

    device: torch.device
    reason: str


def _accelerator_type() -> str | None:
    """The current accelerator's type ('cuda', 'mps', 'xpu', ...) or None."""
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    return None if accelerator is None else accelerator.type


def _type_available(device_type: str) -> bool:
    if device_type == "cpu":
        return True
    if device_type == "meta":
        return True
    if device_type == "cuda":
        return torch.cuda.is_available()
    if device_type == "mps":
        return torch.backends.mps.is_available()
    backend = getattr(torch, device_type, None)
    is_available = getattr(backend, "is_available", None)
    return bool(is_available()) if callable(is_available) else False


def _device_count(device_type: str) -> int:
    if device_type in ("cpu", "meta", "mps"):
        return 1
    backend = getattr(torch, device_type, None)
    device_count = getattr(backend, "device_count", None)
    return int(device_count()) if callable(device_count) else 0


def available_devices() -> list[str]:
    """Every device here, as its tensors report it: ['cuda:0', 'cuda:1', 'cpu'] or
    ['mps:0', 'cpu']."""
    names: list[str] = []
    accelerator = _accelerator_type()
    if accelerator is not None:
        names.extend(f"{accelerator}:{index}" for index in range(_device_count(accelerator)))
    names.append("cpu")
    return names


def _with_index(device: torch.device) -> torch.device:
    """``device`` as its tensors report it: 'cuda' -> 'cuda:<current>', 'mps' -> 'mps:0'.

    The CPU and 'meta' have no index (their tensors report 'cpu' and 'meta').
    """
    if device.index is not None or device.type in ("cpu", "meta"):
        return device
    if device.type == "mps":
        return torch.device("mps", 0)  # there is one MPS device; its tensors report mps:0
    if device.type == _accelerator_type():
        return torch.device(device.type, torch.accelerator.current_device_index())
    current = getattr(getattr(torch, device.type, None), "current_device", None)
    return torch.device(device.type, int(current())) if callable(current) else device


# Words people use for a device that PyTorch names otherwise.
_ALIASES = {"gpu": "cuda", "nvidia": "cuda", "rocm": "cuda", "amd": "cuda", "metal": "mps",
            "apple": "mps", "intel": "xpu", "host": "cpu",
            "tpu": None}  # TPUs need the separate torch_xla package: no near name to offer


def _suggestion(name: str) -> str:
    """' Did you mean 'cuda'?' for a misspelt or colloquial device name, else ''."""
    device_type, _, index = name.partition(":")
    accelerator = _accelerator_type()
    if device_type in _ALIASES and _ALIASES[device_type] is None:
        return ""
    guess = _ALIASES.get(device_type)
    if guess == "cuda" and accelerator not in (None, "cuda"):
        guess = accelerator  # e.g. "gpu" on a Mac means its MPS device
    if guess is None:
        known = ["cpu", "cuda", "mps", "xpu", *([accelerator] if accelerator else [])]
        close = difflib.get_close_matches(device_type, known, n=1, cutoff=0.6)
        guess = close[0] if close else None
    if guess is None:
        return ""
    suggested = f"{guess}:{index}" if index else guess
    there = "" if _type_available(guess) else f" (though no {guess} device is available here)"
    return f" Did you mean {suggested!r}{there}?"


def checked_device(requested: str | torch.device, source: str) -> torch.device:
    """Turn a device request into a usable ``torch.device`` or raise ValueError.

    Names are case-insensitive ("CUDA" is "cuda"); a misspelt or colloquial name ("gpu")
    is refused with the nearest real one suggested.
    """
    given = str(requested)  # as written, for the messages
    if isinstance(requested, str):
        requested = requested.strip().lower()
    try:
        device = torch.device(requested)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"{source} asks for device {given!r}, which is not a device name."
            f"{_suggestion(str(requested))} Available here: {', '.join(available_devices())}."
        ) from None
    if device.type == "meta":
        return device  # data-less tensors: always available, used to demonstrate errors
    if not _type_available(device.type):
        raise ValueError(
            f"{source} asks for device {given!r}, but no {device.type} device is "
            f"available on this machine. Available here: {', '.join(available_devices())}."
        )
    if device.index is not None and device.index >= _device_count(device.type):
        raise ValueError(
            f"{source} asks for device {given!r}, but only "
            f"{_device_count(device.type)} {device.type} device(s) exist. "
            f"Available here: {', '.join(available_devices())}."
        )
    return _with_index(device)


def _computing(device: torch.device, source: str) -> torch.device:
    """``device``, unless it is 'meta', which computes nothing (no training, no timing)."""
    if device.type == "meta":
        raise ValueError(
            f"{source} asks for device 'meta', which holds shapes but no data: nothing "
            "computed there has a value, so nothing can be trained or timed on it. Use one of: "
            f"{', '.join(available_devices())}.")
    return device


def _quiet_profiler_without_gpu() -> None:
    """On a CUDA build with no usable GPU, keep the profiler from logging a driver error.

    PyPI's Linux torch is a CUDA build; where no driver is installed, torch.profiler's Kineto
    asks for the GPUs at every stop and logs "ERROR ... gpuGetDeviceCount failed with code 35"
    (PyTorch 2.15) on stderr, under a CPU-only profile too. Its log level is read at the first
    profile, so setting it here, before any lesson profiles, is in time. A value the user set
    is kept.
    """
    if torch.version.cuda and not torch.cuda.is_available():
        os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # only its USER-level lines


def explain_device(prefer: str | torch.device | None = None) -> DeviceChoice:
    """Pick the device as :func:`get_device` does, and say why."""
    _quiet_profiler_without_gpu()
    from_env = os.environ.get(ENV_VAR, "").strip()
    if from_env:
        source = f"The environment variable {ENV_VAR}"
        device = _computing(checked_device(from_env, source), source)
        return DeviceChoice(device, f"{ENV_VAR}={from_env} is set")
    if prefer is not None:
        source = "get_device(prefer=...)"
        device = _computing(checked_device(prefer, source), source)
        return DeviceChoice(device, f"prefer={str(prefer)!r} was requested")
    accelerator = _accelerator_type()
    if accelerator is not None:
        device = _with_index(torch.device(accelerator))
        return DeviceChoice(device, f"torch.accelerator found a {accelerator} device")
    return DeviceChoice(torch.device("cpu"), "no accelerator is available, so the CPU is used")


def make_current(device: torch.device) -> None:
    """Make ``device`` PyTorch's current device when it is an indexed accelerator.

    Everything that says "the current device" (CUDA events and streams, ``torch.device("cuda")``,
    ``torch.cuda.is_bf16_supported()``, DataParallel's default ``device_ids``) then means the
    device the learner chose, not GPU 0.
    """
    if device.index is None or device.type != _accelerator_type():
        return
    if torch.accelerator.current_device_index() != device.index:
        torch.accelerator.set_device_index(device.index)


def get_device(prefer: str | torch.device | None = None) -> torch.device:
    """Return the device to compute on, and make it PyTorch's current device.

    Order: the ``COURSE_DEVICE`` environment variable, then ``prefer``, then the
    accelerator that ``torch.accelerator`` reports (CUDA, MPS, XPU, ...), then the CPU.
    A requested device that does not exist or is unavailable raises ``ValueError``
    naming it and listing what is available. An accelerator comes with its index
    (``"cuda"`` -> ``cuda:0`` on the current GPU, ``"mps"`` -> ``mps:0``): a tensor on it
    reports the same device, so ``x.device == get_device()`` compares as expected. A chosen
    ``cuda:1`` becomes the current device (:func:`make_current`), so that code which uses
    "the current device" (CUDA events, ``is_bf16_supported``) uses it too.
    """
    device = explain_device(prefer).device
    make_current(device)
    return device


def resolve(device: str | torch.device | None, function: str, *,
            default: torch.device | Callable[[], torch.device] = get_device) -> torch.device:
    """The device a helper's ``device`` argument asks for: the one public way to read it.

    ``None`` gives ``default``: a device, or a function called each time (by default
    :func:`get_device`; the data helpers pass the CPU, and each helper's docstring says which).
    Anything else is checked by :func:`checked_device`, so a refusal names ``function``, its
    ``device`` argument, the value given and the devices available here.
    """
    if device is None:
        return default() if callable(default) else default
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"{function}: device must be a device name such as 'cuda' or 'cpu', a "
                        f"torch.device or None, got {device!r}. Available here: "
                        f"{', '.join(available_devices())}.")
    return checked_device(device, f"{function}(device=...)")


def synchronize(device: str | torch.device | None = None) -> None:
    """Wait until all queued work on ``device`` has finished (no-op on the CPU).

    GPU kernels run asynchronously: a timer stopped without synchronising measures
    only how long it took to *queue* the work.
    """
    device = torch.device(device) if device is not None else get_device()
    if device.type in ("cpu", "meta"):
        return
    accelerator = _accelerator_type()
    if accelerator == device.type:
        torch.accelerator.synchronize(device)
    elif device.type == "cuda":  # pragma: no cover - CUDA present but not the current accelerator
        torch.cuda.synchronize(device)
