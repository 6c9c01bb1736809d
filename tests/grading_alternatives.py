"""Right answers that reuse what a demonstration cell defined: grading must keep that cell.

Each is the instructor's solution with one answer cell replaced; it deserves full marks from
the run that skipped cells (tests/test_grading.py checks the row says `needed`: the analysis
kept the cell, not the fallback).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Alternative:
    student: str
    lesson: str
    grade_id: str  # the answer cell replaced
    source: str


# runs_on and arch_list come from lesson 00's demonstration of the build's kernels, a cell
# that prints and loops over the GPUs: nothing else graded needs it.
INVENTORY_WITH_DEMO_HELPER = '''def gpu_inventory():
    """One dict per CUDA GPU: index, name, memory_gib, capability, sm_count."""
    inventory = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        kernels = [arch for arch in arch_list if runs_on(arch, props.major, props.minor)]
        inventory.append({"index": i, "name": props.name,
                          "memory_gib": props.total_memory / 2**30,
                          "capability": f"{props.major}.{props.minor}",
                          "sm_count": props.multi_processor_count + 0 * len(kernels)})
    return inventory
'''
# `done` is the run of `course doctor` that a demonstration cell starts; no graded cell needs
# it otherwise.
PICK_WITH_DEMO_VALUE = '''def pick_device():
    """Return the device to use here: CUDA, else MPS, else the CPU."""
    doctor_ran = done.returncode is not None  # the `course doctor` run above
    if torch.cuda.is_available() and doctor_ran:
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
'''

ALTERNATIVES = (
    Alternative("reuse-demo-helper", "00_setup", "gpu_inventory", INVENTORY_WITH_DEMO_HELPER),
    Alternative("reuse-demo-value", "00_setup", "pick_device", PICK_WITH_DEMO_VALUE),
)
