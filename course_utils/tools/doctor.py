"""``course doctor``: is this Python ready for the course, and which device will it use?

:func:`collect` gathers the facts as a JSON-able dict; :func:`main` prints them as a
short report (or as JSON) and returns the exit status:

* 0 -- the environment works (PyTorch imports, the device request can be met);
* 1 -- PyTorch cannot be imported;
* 2 -- a requested device (``COURSE_DEVICE``) is not available here.

On failure exactly one line, starting ``course doctor:``, goes to stderr.

PyTorch is imported inside the functions, never at module level, so that a missing
PyTorch is reported instead of crashing the import of this module.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import platform
import sys
from importlib import metadata
from typing import Any, TextIO

from ..grading import sandbox as grading_sandbox

#: Distribution name -> the label shown in the report.
PACKAGES = {
    "torch": "PyTorch",
    "nbgrader": "nbgrader",
    "nbval": "nbval",
    "jupyterlab": "JupyterLab",
}
NOT_INSTALLED = "not installed"
EXIT_OK, EXIT_NO_TORCH, EXIT_NO_DEVICE = 0, 1, 2


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return NOT_INSTALLED


def _start_method() -> dict[str, Any]:
    """The multiprocessing start method, read without fixing it as a side effect."""
    chosen = multiprocessing.get_start_method(allow_none=True)
    # The first entry is the platform's default (documented); asking
    # get_start_method() without allow_none would *set* the context.
    default = multiprocessing.get_all_start_methods()[0]
    return {"method": chosen or default, "explicitly_set": chosen is not None}


def _cuda_devices(torch: Any) -> list[dict[str, Any]]:
    devices = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        devices.append({
            "device": f"cuda:{index}",
            "index": index,
            "name": props.name,
            "memory_gib": round(props.total_memory / 2**30, 2),
            "capability": f"{props.major}.{props.minor}",
            "sm_count": props.multi_processor_count,
            # The rule torch.cuda.is_bf16_supported(including_emulation=False) applies
            # to the *current* device, applied to each device: native bf16 needs
            # compute capability 8.0 (Ampere) or newer; ROCm GPUs support it.
            "bf16": bool(torch.version.hip) or props.major >= 8,
        })
    return devices


def _mps_device(torch: Any) -> dict[str, Any]:
    try:
        memory = round(torch.mps.recommended_max_memory() / 2**30, 2)
    except Exception:  # noqa: BLE001 - older macOS/PyTorch: not reported
        memory = None
    try:
        torch.ones(1, dtype=torch.bfloat16, device="mps")
        bf16 = True
    except Exception:  # noqa: BLE001 - bf16 on MPS needs macOS 14 or newer
        bf16 = False
    return {"device": "mps", "index": 0, "name": "Apple MPS", "memory_gib": memory,
            "capability": None, "sm_count": None, "bf16": bf16}


def _other_accelerator(torch: Any, device_type: str) -> list[dict[str, Any]]:
    """XPU and friends: report what their backend module offers."""
    backend = getattr(torch, device_type, None)
    count = int(getattr(backend, "device_count", lambda: 0)())
    devices = []
    for index in range(count):
        name = None
        get_name = getattr(backend, "get_device_name", None)
        if callable(get_name):
            try:
                name = str(get_name(index))
            except Exception:  # noqa: BLE001 - a name is only informative
                name = None
        devices.append({"device": f"{device_type}:{index}", "index": index, "name": name,
                        "memory_gib": None, "capability": None, "sm_count": None,
                        "bf16": None})
    return devices


def _accelerators(torch: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if torch.cuda.is_available():
        found.extend(_cuda_devices(torch))
    if torch.backends.mps.is_available():
        found.append(_mps_device(torch))
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    if accelerator is not None and accelerator.type not in ("cuda", "mps"):
        found.extend(_other_accelerator(torch, accelerator.type))
    return found


def _why_no_accelerator(torch: Any) -> str:
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
        return ("this PyTorch build is CPU-only (torch.version.cuda is None): it cannot use an "
                f"NVIDIA GPU even if the machine has one.{driver} On Windows the default "
                "`pip install torch` is CPU-only: install a CUDA build with the command "
                "pytorch.org gives (README, 'GPU, Apple silicon, Colab, CPU only').")
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


def _advice(system: str, start_method: str, device_type: str | None,
            cuda_initialized: bool, cpu_count: int | None) -> list[str]:
    advice = []
    if start_method in ("spawn", "forkserver"):
        advice.append(
            f"DataLoader workers start with '{start_method}' here: each worker re-imports your "
            "script, so put the training code of a script under "
            "`if __name__ == \"__main__\":`.")
        advice.append(
            "In a notebook, workers cannot import classes or functions defined in the "
            "notebook: num_workers=0 is the safe start; move the Dataset to a .py file before "
            "raising it.")
    else:
        advice.append(
            f"DataLoader workers start with '{start_method}' here (Linux): they start fast and "
            "work in notebooks, but must not use CUDA themselves: keep datasets on the CPU and "
            "move each batch to the GPU in the main process.")
        if cuda_initialized:
            advice.append(
                "CUDA was already initialised in this process: a forked worker that touches "
                "CUDA fails with 'Cannot re-initialize CUDA in forked subprocess'.")
    if cpu_count and cpu_count > 1:
        advice.append(
            f"When data loading is the bottleneck, try num_workers={min(8, cpu_count - 1)} "
            "(about one per spare CPU core); more workers than cores only adds overhead.")
    else:
        advice.append("One CPU core: keep num_workers=0.")
    if device_type == "cuda":
        advice.append(
            "pin_memory=True in the DataLoader speeds up host-to-GPU copies here "
            "(pair it with .to(device, non_blocking=True)).")
    else:
        advice.append(
            "pin_memory only helps when copying to a CUDA device: leave it False on "
            f"{device_type or 'this machine'}.")
    if system == "Windows":
        advice.append("On Windows, run scripts with DataLoader workers from a terminal, "
                      "not from an interactive interpreter.")
    return advice


def collect() -> dict[str, Any]:
    """Every fact the report shows, as a JSON-able dict.

    ``report["ok"]`` is False when the environment does not work; ``report["error"]``
    then says why in one sentence.
    """
    start = _start_method()
    report: dict[str, Any] = {
        "ok": True,
        "error": None,
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "platform": {"system": platform.system(), "release": platform.release(),
                     "machine": platform.machine()},
        "packages": {name: _version(name) for name in PACKAGES},
        "multiprocessing": start,
        "cpu": {"torch_threads": None, "os_cpu_count": os.cpu_count()},
        # For instructors: the sandbox `course grade` runs student kernels in.
        "grading_isolation": grading_sandbox.detect().as_dict(),
    }
    try:
        import torch
    except ImportError as error:
        report.update(ok=False, error=(
            f"PyTorch cannot be imported in {sys.executable} ({error}); install the course "
            "requirements (make install) and use that environment."))
        return report

    from ..lab.devices import available_devices, explain_device

    # Read before anything below touches CUDA (asking for device properties initialises it).
    cuda_initialized = bool(torch.cuda.is_initialized())
    report["torch"] = {
        "version": torch.__version__,
        "cuda_build": torch.version.cuda,
        "hip_build": torch.version.hip,
        "mps_built": bool(torch.backends.mps.is_built()),
        "cuda_initialized": cuda_initialized,
    }
    report["cpu"]["torch_threads"] = torch.get_num_threads()

    try:
        choice = explain_device()
        report["device"] = {"picked": str(choice.device), "reason": choice.reason}
        device_type = choice.device.type
    except ValueError as error:
        report.update(ok=False, error=str(error))
        report["device"] = {"picked": None, "reason": None}
        device_type = None
    report["device"]["available"] = available_devices()

    accelerators = _accelerators(torch)
    report["accelerators"] = accelerators
    report["no_accelerator_reason"] = None if accelerators else _why_no_accelerator(torch)
    report["advice"] = _advice(report["platform"]["system"], start["method"], device_type,
                               cuda_initialized, report["cpu"]["os_cpu_count"])
    return report


def _format_accelerator(entry: dict[str, Any]) -> str:
    parts = [f"{entry['device']:<8}", entry["name"] or "(unnamed)"]
    if entry["memory_gib"] is not None:
        parts.append(f"{entry['memory_gib']:.1f} GiB")
    if entry["capability"] is not None:
        parts.append(f"capability {entry['capability']}")
    if entry["sm_count"] is not None:
        parts.append(f"{entry['sm_count']} SMs")
    if entry["bf16"] is not None:
        parts.append("bf16 " + ("yes" if entry["bf16"] else "no"))
    return "  " + "  ".join(parts)


def format_report(report: dict[str, Any]) -> str:
    """The report as short, readable text."""
    lines = ["course doctor: is this environment ready for the course?", "", "Software"]
    python = report["python"]
    lines.append(f"  {'Python':<12} {python['version']}  ({python['executable']})")
    torch_facts = report.get("torch")
    for name, label in PACKAGES.items():
        version = report["packages"][name]
        if name == "torch" and torch_facts:
            build = (f"CUDA {torch_facts['cuda_build']}" if torch_facts["cuda_build"]
                     else f"ROCm {torch_facts['hip_build']}" if torch_facts["hip_build"]
                     else "CPU-only build" if not torch_facts["mps_built"] else "MPS build")
            version = f"{torch_facts['version']}  ({build})"
        lines.append(f"  {label:<12} {version}")

    if torch_facts:
        device = report["device"]
        lines += ["", "Device"]
        if device["picked"] is not None:
            lines.append(f"  get_device() picks {device['picked']}: {device['reason']}.")
        else:
            lines.append("  get_device() fails (see the error below).")
        lines.append(f"  Available here: {', '.join(device['available'])}")

        lines += ["", "Accelerators"]
        if report["accelerators"]:
            lines += [_format_accelerator(entry) for entry in report["accelerators"]]
        else:
            lines.append(f"  none: {report['no_accelerator_reason']}")

    cpu = report["cpu"]
    lines += ["", "CPU and processes"]
    if cpu["torch_threads"] is not None:
        lines.append(f"  PyTorch uses {cpu['torch_threads']} thread(s); "
                     f"os.cpu_count() = {cpu['os_cpu_count']}")
    start = report["multiprocessing"]
    lines.append(f"  multiprocessing start method: {start['method']}"
                 + ("" if start["explicitly_set"] else " (the default here)"))
    if torch_facts:
        lines.append("  CUDA already initialised in this process: "
                     + ("yes" if torch_facts["cuda_initialized"] else "no"))

    if report.get("advice"):
        lines += ["", f"Advice for {report['platform']['system'] or 'this system'}"]
        lines += [f"  - {item}" for item in report["advice"]]
    isolation = report["grading_isolation"]
    lines += ["", "Grading (instructors)", f"  isolation: {isolation['description']}"]
    if not isolation["sandboxed"]:
        lines.append(f"  `course grade` needs it: {isolation['problem']}")
    lines += ["", "Verdict: " + ("ready." if report["ok"] else f"NOT ready: {report['error']}")]
    return "\n".join(lines)


def main(as_json: bool = False, stream: TextIO | None = None) -> int:
    """Print the report to ``stream`` (default: sys.stdout); return the exit status."""
    stream = sys.stdout if stream is None else stream
    report = collect()
    if as_json:
        stream.write(json.dumps(report, indent=2) + "\n")
    else:
        stream.write(format_report(report) + "\n")
    stream.flush()
    if report["ok"]:
        return EXIT_OK
    if as_json:  # stdout is data for a program; the text report already ends with the reason
        message = " ".join(str(report["error"]).split())  # exactly one line
        print(f"course doctor: {message}", file=sys.stderr)
    return EXIT_NO_TORCH if "torch" not in report else EXIT_NO_DEVICE


if __name__ == "__main__":
    sys.exit(main(as_json="--json" in sys.argv[1:]))
