"""course_utils.lab.backends: one record per device type, and the generic one for the rest.

The simulated machines (checks/machines.py) stand in for GPUs this machine does not have: an
XPU is a type the table does not name, so it exercises the generic entry end to end.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from course_utils import backends, memory
from course_utils.checks import machines
from course_utils.lab.backends import GENERIC, Backend, CompilerStatus, MemoryReading, backend_for
from course_utils.probe import SimulatedMachine

# ------------------------------------------------------------------ the table


def test_each_named_type_has_its_entry_and_every_other_type_the_generic_one():
    for device_type in ("cuda", "mps", "cpu", "meta"):
        assert backend_for(device_type) is backends.BACKENDS[device_type]
        assert backend_for(device_type).device_type == device_type
    for device in ("xpu", "xpu:1", torch.device("hpu"), "mtia"):
        assert backend_for(device) is GENERIC


def test_every_entry_answers_every_question():
    questions = [f.name for f in dataclasses.fields(Backend)
                 if f.name not in ("device_type", "accelerator", "pinned_copies", "computes",
                                   "bf16_because")]
    for backend in [*backends.BACKENDS.values(), GENERIC]:
        assert all(callable(getattr(backend, name)) for name in questions), backend.device_type
        assert backend.bf16_because or not backend.computes  # amp_policy's reason


def test_the_cpu_and_meta_are_not_accelerators_and_meta_computes_nothing():
    cpu, meta = backend_for("cpu"), backend_for("meta")
    assert not cpu.accelerator and not meta.accelerator and cpu.computes and not meta.computes
    assert cpu.memory(torch.device("cpu")) is None and meta.memory(torch.device("meta")) is None
    assert cpu.display_name(torch.device("cpu")) == "the CPU"
    assert not meta.compiler(torch.device("meta")).ready


# ------------------------------------------------------------------ an XPU: the generic entry

def test_an_xpu_is_named_by_torch_xpu_never_the_cpu():
    xpu = torch.device("xpu", 0)
    with SimulatedMachine(machines.XPU) as machine:
        assert backend_for(xpu).display_name(xpu) == "Intel(R) Data Center GPU Max 1550"
    assert "torch.xpu.get_device_name" in machine.queries


def test_without_a_name_a_type_is_still_an_accelerator_not_the_cpu():
    assert GENERIC.display_name(torch.device("hpu")) == "a hpu accelerator"


def test_an_xpu_reads_its_memory_through_torch_accelerator():
    with SimulatedMachine(machines.XPU) as machine:
        reading = memory.accelerator_memory()
        memory.reset_peak("xpu")
        memory.release_cached_memory("xpu:0")
        total = GENERIC.total_memory(torch.device("xpu", 0))
    assert reading == MemoryReading("xpu:0", 0, 0, 0)
    assert total == machines.XPUS["Max 1550"]["total_memory"]
    for asked in ("torch.accelerator.memory_allocated", "torch.accelerator.max_memory_allocated",
                  "torch.accelerator.reset_peak_memory_stats", "torch.accelerator.empty_cache"):
        assert asked in machine.queries


def test_an_xpu_of_another_machine_has_no_reading():
    """On a machine without an XPU, the generic entry has nothing to read (no error)."""
    xpu = torch.device("xpu", 0)
    with SimulatedMachine(machines.CUDA):
        assert GENERIC.memory(xpu) is None and GENERIC.total_memory(xpu) is None
        GENERIC.reset_peak(xpu)
        GENERIC.empty_cache(xpu)


@pytest.mark.parametrize("model, native", [("Max 1550", True), ("Arc A770", False)])
def test_an_xpu_has_native_bf16_where_torch_xpu_says_so_without_emulation(model, native):
    with SimulatedMachine(machines.machine("an Intel box", {"xpu": [model]})):
        assert GENERIC.native_bf16(torch.device("xpu", 0)) is native


def test_without_triton_the_generic_compiler_says_what_is_missing(monkeypatch):
    import torch.utils._triton as triton_probe

    monkeypatch.setattr(triton_probe, "has_triton", lambda: False)
    status = GENERIC.compiler(torch.device("xpu", 0))
    assert status == CompilerStatus(False, status.reason) and "needs Triton" in status.reason
    monkeypatch.setattr(triton_probe, "has_triton", lambda: True)
    assert GENERIC.compiler(torch.device("xpu", 0)).ready


# ------------------------------------------------------------------ CUDA and MPS, simulated

@pytest.mark.parametrize("gpu, native", [("H100", True), ("A100", True), ("T4", False)])
def test_cuda_bf16_is_native_from_compute_capability_8(gpu, native):
    with SimulatedMachine(machines.machine("one GPU", {"cuda": [gpu]})):
        cuda = torch.device("cuda", 0)
        assert backend_for(cuda).native_bf16(cuda) is native
        assert backend_for(cuda).capability(cuda) == (machines.GPUS[gpu]["major"],
                                                       machines.GPUS[gpu]["minor"])


def test_cuda_is_asked_about_the_device_given_not_the_current_one():
    t4_and_a100 = machines.machine("a T4 and an A100", {"cuda": ["T4", "A100"]})
    with SimulatedMachine(t4_and_a100):
        cuda1 = torch.device("cuda", 1)
        assert backend_for(cuda1).display_name(cuda1) == "NVIDIA A100-SXM4-40GB"
        assert backend_for(cuda1).native_bf16(cuda1) is True
        assert backend_for(cuda1).multiprocessors(cuda1) == 108


def test_mps_is_named_and_compiles_metal():
    mps = torch.device("mps", 0)
    with SimulatedMachine(machines.MPS):
        assert backend_for(mps).display_name(mps) == "Apple GPU (MPS)"
        assert backend_for(mps).compiler(mps).ready


# ------------------------------------------------------------------ adding a backend

def test_a_new_backend_is_one_entry(monkeypatch):
    """An entry for a new type changes what every helper says about it, and nothing else."""
    hpu = dataclasses.replace(GENERIC, device_type="hpu",
                              display_name=lambda device: "Gaudi 3")
    monkeypatch.setitem(backends.BACKENDS, "hpu", hpu)
    assert backend_for("hpu:0").display_name(torch.device("hpu", 0)) == "Gaudi 3"
    assert backend_for("xpu") is GENERIC


# ------------------------------------------------------------------ simulated machines

def test_a_machine_is_described_by_its_accelerators_by_type():
    spec = machines.machine("a mixed box", {"cuda": ["T4"], "xpu": ["Arc A770"], "mps": 1})
    assert spec["accelerators"] == {"cuda": [machines.GPUS["T4"]], "xpu": [machines.XPUS[
        "Arc A770"]], "mps": 1}
    assert spec["cuda_version"] == "12.8" and machines.gpus(spec) == [machines.GPUS["T4"]]
    assert machines.CPU["accelerators"] == {} and machines.gpus(machines.CPU) == []
    with pytest.raises(ValueError, match="no simulated 'tpu' devices; the types are mps, cuda"):
        machines.machine("a TPU pod", {"tpu": ["v5e"]})


@pytest.mark.parametrize("spec, xpus, accelerator", [
    (machines.XPU, 1, "xpu"), (machines.CUDA, 0, "cuda"), (machines.CPU, 0, None)])
def test_every_simulated_machine_answers_for_every_type(spec, xpus, accelerator):
    """torch.xpu answers on every machine, so one without an XPU says so (not the real one)."""
    with SimulatedMachine(spec):
        assert (torch.xpu.is_available(), torch.xpu.device_count()) == (bool(xpus), xpus)
        current = torch.accelerator.current_accelerator()
        assert (current.type if current else None) == accelerator
        if not xpus:
            with pytest.raises(RuntimeError, match="No XPU devices are available"):
                torch.xpu.get_device_name(0)
