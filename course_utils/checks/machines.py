"""Simulated machines for checks of device logic (answered by probe.SimulatedMachine).

Each is plain data: the GPUs torch.cuda reports (as get_device_properties would), whether
MPS is there, and the CUDA version of the PyTorch build.
"""
from __future__ import annotations

GPUS = {
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


def machine(name: str, gpus: list[str] = (), mps: bool = False) -> dict:
    """A machine spec: ``machine("a laptop with no GPU")``, ``machine("...", ["H100"])``."""
    return {"name": name, "gpus": [dict(GPUS[gpu]) for gpu in gpus], "mps": mps,
            "cuda_version": "12.8" if gpus else None}


CUDA = machine("a Linux machine with one NVIDIA H100", ["H100"])
TWO_GPUS = machine("a server with two NVIDIA A100s", ["A100", "A100"])
MPS = machine("a Mac with Apple silicon (MPS)", mps=True)
CPU = machine("a laptop with no GPU")
CUDA_AND_MPS = machine("a machine that reports both CUDA and MPS", ["T4"], mps=True)
