"""Helpers for "Faster model training with GPUs in PyTorch".

Notebooks start with ``from course_utils import checks, get_device``. Device helpers
load torch on first use, so tools that never touch a device (the grader's
workers, the release) start quickly.
"""
from importlib import import_module

__all__ = ["checks", "explain_device", "get_device", "synchronize"]
__version__ = "0.1.0"

_DEVICE_HELPERS = {"explain_device", "get_device", "synchronize"}


def __getattr__(name: str):
    if name in _DEVICE_HELPERS:
        return getattr(import_module(".devices", __name__), name)
    if name == "checks":
        return import_module(".checks", __name__)
    raise AttributeError(f"module 'course_utils' has no attribute {name!r}")
