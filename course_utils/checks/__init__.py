"""Learner-facing checks: ``from course_utils import checks; checks.check_pick_device(f)``.

Each check prints one short line on success and raises :class:`CheckFailure`
(an ``AssertionError``) naming the cause and the fix on failure. See
``docs/authoring.md`` for how to write one.
"""
from ._core import REGISTRY, Check, CheckFailure
from .lesson00 import check_gpu_inventory, check_pick_device
from .lesson01 import check_on_gpu, check_predict, check_to_device
from .lesson02 import check_checkpoint_round_trip, check_evaluate_accuracy, check_train_one_epoch

__all__ = ["REGISTRY", "Check", "CheckFailure", "check_gpu_inventory", "check_on_gpu",
           "check_pick_device", "check_predict", "check_to_device",
           "check_checkpoint_round_trip", "check_evaluate_accuracy", "check_train_one_epoch"]
