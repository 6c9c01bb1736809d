"""Simulated machines for checks of device logic (answered by probe.SimulatedMachine).

Each is plain data (it travels to the student's kernel as JSON): the accelerators it has, by
device type, as PyTorch reports them (a GPU as ``get_device_properties`` would), and the CUDA
version of the PyTorch build. ``probe.SimulatedMachine`` derives every simulated torch module
from the ``accelerators`` mapping, so a machine with another type of device is one entry here.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, cast


class GpuSpec(TypedDict):
    """A CUDA GPU, as ``torch.cuda.get_device_properties`` reports it."""

    name: str
    total_memory: int  # bytes
    major: int  # compute capability
    minor: int
    multi_processor_count: int


class XpuSpec(TypedDict):
    """An Intel GPU, as ``torch.xpu.get_device_properties`` reports it."""

    name: str
    total_memory: int  # bytes
    has_bfloat16_conversions: bool  # native bfloat16 (is_bf16_supported(including_emulation=False))


class Accelerators(TypedDict, total=False):
    """What a machine has beside its CPU, by device type; a type left out is absent."""

    cuda: list[GpuSpec]
    mps: int  # 1: an Apple silicon GPU
    xpu: list[XpuSpec]


class MachineSpec(TypedDict):
    name: str  # how the feedback names it: "a Linux machine with one NVIDIA H100"
    accelerators: Accelerators
    cuda_version: str | None  # torch.version.cuda of its PyTorch build


GPUS: dict[str, GpuSpec] = {
    "H100": {"name": "NVIDIA H100 80GB HBM3", "total_memory": 85_045_231_616, "major": 9,
             "minor": 0, "multi_processor_count": 132},
    "A100": {"name": "NVIDIA A100-SXM4-40GB", "total_memory": 42_505_273_344, "major": 8,
             "minor": 0, "multi_processor_count": 108},
    "T4": {"name": "Tesla T4", "total_memory": 15_835_660_288, "major": 7, "minor": 5,
           "multi_processor_count": 40},
    "RTX 4090": {"name": "NVIDIA GeForce RTX 4090", "total_memory": 25_393_692_672, "major": 8,
                 "minor": 9, "multi_processor_count": 128},
    "B200": {"name": "NVIDIA B200", "total_memory": 191_514_820_608, "major": 10, "minor": 0,
             "multi_processor_count": 148},
}

XPUS: dict[str, XpuSpec] = {
    "Max 1550": {"name": "Intel(R) Data Center GPU Max 1550", "total_memory": 68_702_699_520,
                 "has_bfloat16_conversions": True},
    "Arc A770": {"name": "Intel(R) Arc(TM) A770 Graphics", "total_memory": 16_225_243_136,
                 "has_bfloat16_conversions": False},
}

# Device type -> the catalogue its models are named from in machine()'s request.
_CATALOGUES = {"cuda": GPUS, "xpu": XPUS}


def machine(name: str, accelerators: Mapping[str, int | Sequence[str]] | None = None
            ) -> MachineSpec:
    """A machine spec: ``machine("a laptop with no GPU")``,
    ``machine("a server", {"cuda": ["H100", "A100"]})``, ``machine("a Mac", {"mps": 1})``,
    ``machine("an Intel box", {"xpu": ["Max 1550"]})``: GPUs by their model in ``GPUS`` or
    ``XPUS``, MPS by its count.
    """
    described: dict[str, Any] = {}
    for device_type, request in (accelerators or {}).items():
        if device_type == "mps":
            described["mps"] = int(cast(int, request))
        elif device_type in _CATALOGUES:
            catalogue = cast(Mapping[str, Mapping[str, Any]], _CATALOGUES[device_type])
            described[device_type] = [dict(catalogue[model])
                                      for model in cast(Sequence[str], request)]
        else:
            raise ValueError(f"machine(): no simulated {device_type!r} devices; the types are "
                             f"{', '.join(['mps', *_CATALOGUES])}.")
    return {"name": name, "accelerators": cast(Accelerators, described),
            "cuda_version": "12.8" if described.get("cuda") else None}


def gpus(spec: MachineSpec) -> list[GpuSpec]:
    """The CUDA GPUs of a machine spec (none: an empty list)."""
    return spec["accelerators"].get("cuda", [])


CUDA = machine("a Linux machine with one NVIDIA H100", {"cuda": ["H100"]})
TWO_GPUS = machine("a server with two NVIDIA A100s", {"cuda": ["A100", "A100"]})
MPS = machine("a Mac with Apple silicon (MPS)", {"mps": 1})
CPU = machine("a laptop with no GPU")
CUDA_AND_MPS = machine("a machine that reports both CUDA and MPS", {"cuda": ["T4"], "mps": 1})
XPU = machine("a Linux machine with one Intel Data Center GPU Max (XPU)", {"xpu": ["Max 1550"]})
