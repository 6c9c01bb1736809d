"""What ``course doctor`` asks PyTorch: the accelerators, why there is none, and whether
``torch.compile`` can build code here.

Each device's answers come from the backend table (:mod:`course_utils.lab.backends`), the
course's one place for what a type of device can do; nothing here branches on device types.
PyTorch is passed in (``torch``), never imported at module level: the doctor must run, and say
so, where PyTorch cannot be imported.
"""
from __future__ import annotations

import os
import sys
from typing import Any

from ..lab.backends import backend_for
from ..lab.devices import available_devices
from .doctor_records import Accelerator, CompilerFacts


def accelerators(torch: Any) -> list[Accelerator]:
    """Every accelerator device PyTorch can use here, described by its backend."""
    found = []
    for name in available_devices():
        device = torch.device(name)
        backend = backend_for(device)
        if not backend.accelerator:
            continue
        total, capability = backend.total_memory(device), backend.capability(device)
        found.append(Accelerator(
            device=name, index=device.index or 0, name=backend.display_name(device),
            memory_gib=None if total is None else round(total / 2**30, 2),
            capability=None if capability is None else f"{capability[0]}.{capability[1]}",
            sm_count=backend.multiprocessors(device), bf16=backend.native_bf16(device)))
    return found


def compiler(torch: Any, picked: Any | None) -> list[CompilerFacts]:
    """Can Inductor build code here: for the CPU (a C++ compiler), then for ``picked`` (the
    device get_device() picks), each as its backend says."""
    devices = [torch.device("cpu")]
    if picked is not None and picked.type != "cpu":
        devices.append(picked)
    facts = []
    for device in devices:
        status = backend_for(device).compiler(device)
        facts.append(CompilerFacts(str(device), status.ready, status.reason))
    return facts


def why_no_accelerator(torch: Any) -> str:
    """Why PyTorch sees no accelerator: the build, a hidden GPU, the driver, or no GPU at all.

    A CPU-only build cannot use a GPU whatever the machine has; a CUDA build needs an NVIDIA
    driver, one that is new enough for its CUDA major version. nvidia-smi, installed with the
    driver, tells the driver's version without PyTorch.
    """
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")
    if torch.version.cuda is None and torch.version.hip is None:
        if sys.platform == "darwin":
            if torch.backends.mps.is_built():
                return "this Mac's GPU (MPS) is not available (MPS needs macOS 12.3+)."
            return "this PyTorch build has no MPS support."
        driver = (" There is an NVIDIA driver here (nvidia-smi found), so the GPU is only "
                  "waiting for a CUDA build." if smi else "")
        how = ("On Windows the default `pip install torch` is CPU-only: install a CUDA build "
               "with the command pytorch.org gives" if sys.platform == "win32" else
               "For a CUDA build, run `make lab` on a fresh clone without "
               "TORCH_INDEX=.../whl/cpu")
        return ("this PyTorch build is CPU-only (torch.version.cuda is None): it cannot use an "
                f"NVIDIA GPU even if the machine has one.{driver} {how} (README, 'GPU, Apple "
                "silicon, Colab, CPU only').")
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return "CUDA_VISIBLE_DEVICES is set to an empty string, which hides every GPU."
    if torch.version.cuda is None:  # a ROCm build
        return (f"PyTorch was built with ROCm {torch.version.hip} but sees no AMD GPU: check "
                "the ROCm driver with rocm-smi.")
    built = f"PyTorch was built with CUDA {torch.version.cuda}"
    if smi is None:
        return (f"{built}, but there is no NVIDIA driver here (nvidia-smi is not on the PATH): "
                "the machine has no NVIDIA GPU, or its driver is not installed.")
    try:
        result = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30, check=False)
        lines = (result.stdout.strip() or result.stderr.strip()).splitlines()
        driver = lines[0].strip() if result.returncode == 0 and lines else None
        said = lines[0].strip() if lines else f"exit status {result.returncode}"
    except (OSError, subprocess.SubprocessError) as error:
        driver, said = None, str(error)
    if driver is None:
        return (f"{built}; nvidia-smi is installed but fails ({said}): the NVIDIA driver is "
                "not working. Reinstall it, or reboot after a driver update.")
    # NVIDIA's minor version compatibility: a CUDA 11.x, 12.x or 13.x build runs on a driver
    # of at least 450, 525 or 580 (docs.nvidia.com/deploy/cuda-compatibility/
    # minor-version-compatibility.html).
    needed = {"11": 450, "12": 525, "13": 580}.get(torch.version.cuda.split(".")[0])
    major = driver.split(".")[0]
    if needed and major.isdigit() and int(major) < needed:
        return (f"the NVIDIA driver {driver} is too old for this PyTorch, built with CUDA "
                f"{torch.version.cuda}: CUDA {torch.version.cuda.split('.')[0]}.x builds need "
                f"driver {needed} or newer. Update the driver, or install a PyTorch build for "
                "an older CUDA (README, 'GPU, Apple silicon, Colab, CPU only').")
    return (f"{built} and the NVIDIA driver {driver} is installed, but PyTorch sees no GPU it "
            "can use: run nvidia-smi to see whether it lists one, and read the warning that "
            "torch.cuda.is_available() prints.")
