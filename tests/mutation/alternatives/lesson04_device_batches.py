"""Right alternatives: imported from tests/checks/lesson04/test_device_batches.py."""
from __future__ import annotations

from ...checks.lesson04.test_device_batches import (
    DeviceGenerator,
    NumpyGenerator,
    PythonRandom,
    SeededPerEpoch,
    WithIndexSelect,
    WithTensorBatches,
)

ALTERNATIVES = [WithTensorBatches, SeededPerEpoch, PythonRandom, NumpyGenerator, DeviceGenerator,
                WithIndexSelect]
