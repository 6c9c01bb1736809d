"""Learner-facing checks: ``from course_utils import checks; checks.check_pick_device(f)``.

Each check prints one short line on success and raises :class:`CheckFailure`
(an ``AssertionError``) naming the cause and the fix on failure. See
``docs/authoring.md`` for how to write one.
"""
from ._core import REGISTRY, Check, CheckFailure
from .lesson00 import check_gpu_inventory, check_pick_device

__all__ = ["REGISTRY", "Check", "CheckFailure", "check_gpu_inventory", "check_pick_device"]
