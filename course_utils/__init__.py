"""Helpers for "Faster model training with GPUs in PyTorch": the learner's face of the package.

Notebooks start with ``from course_utils import checks, get_device``. The learner helpers live
in :mod:`course_utils.lab` and are forwarded here lazily, so ``from course_utils import memory``
works and tools that never touch a device (the grader's workers, the release) do not load
torch. docs/architecture.md maps the package.
"""
from importlib import import_module

__all__ = ["checks", "explain_device", "get_device", "synchronize"]
__version__ = "0.1.0"

_DEVICE_HELPERS = {"explain_device", "get_device", "synchronize"}
# The modules of the learner's wing, importable as attributes of the package.
_LAB_MODULES = {"backends", "data", "devices", "distributed", "errors", "matmul", "measure",
                "memory", "overhead", "pipeline", "pipeline_parallel", "plots", "precision",
                "report", "sharding", "speedrun", "timing", "training"}


def __getattr__(name: str):
    if name in _DEVICE_HELPERS:
        return getattr(import_module(".lab.devices", __name__), name)
    if name in _LAB_MODULES:
        return import_module(f".lab.{name}", __name__)
    if name == "checks":
        return import_module(".checks", __name__)
    raise AttributeError(f"module 'course_utils' has no attribute {name!r}")
