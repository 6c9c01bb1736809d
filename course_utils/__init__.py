"""Helpers for "Faster model training with GPUs in PyTorch".

Notebooks start with ``from course_utils import checks, get_device``.
"""
from .devices import explain_device, get_device, synchronize

__all__ = ["explain_device", "get_device", "synchronize"]
__version__ = "0.1.0"
