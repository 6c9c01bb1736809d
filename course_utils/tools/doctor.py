"""``course doctor``: is this Python ready for the course, and which device will it use?

:func:`examine` gathers the facts as a :class:`Report` (typed records; ``as_dict()`` is the
``--json`` form, which :func:`collect` returns); :func:`main` prints them as a short report
(or as JSON) and returns the exit status:

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
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any, TextIO

from ..grading import cgroups as grading_cgroups
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


# ------------------------------------------------------------------ the report's records
# Field order is the order of the --json output.

@dataclass(frozen=True)
class PythonFacts:
    version: str
    executable: str


@dataclass(frozen=True)
class PlatformFacts:
    system: str  # 'Linux', 'Darwin', 'Windows' ('' when unknown)
    release: str
    machine: str


@dataclass(frozen=True)
class StartMethod:
    method: str  # how DataLoader workers start: 'fork', 'spawn' or 'forkserver'
    explicitly_set: bool  # False: the platform's default


@dataclass(frozen=True)
class CpuFacts:
    torch_threads: int | None  # None when PyTorch cannot be imported
    os_cpu_count: int | None


@dataclass(frozen=True)
class TorchFacts:
    version: str
    cuda_build: str | None
    hip_build: str | None
    mps_built: bool
    cuda_initialized: bool  # before the doctor touched CUDA


@dataclass(frozen=True)
class DeviceFacts:
    picked: str | None  # what get_device() returns; None when it fails
    reason: str | None
    available: list[str]


@dataclass(frozen=True)
class Accelerator:
    device: str  # 'cuda:0'
    index: int
    name: str | None
    memory_gib: float | None
    capability: str | None  # CUDA compute capability, '8.0'
    sm_count: int | None
    bf16: bool | None  # native bfloat16; None: unknown


@dataclass(frozen=True)
class Report:
    """Everything ``course doctor`` found. The PyTorch part is None when torch cannot load."""

    ok: bool
    error: str | None  # why the environment does not work, one sentence
    python: PythonFacts
    platform: PlatformFacts
    packages: dict[str, str]  # distribution -> version or NOT_INSTALLED
    multiprocessing: StartMethod
    cpu: CpuFacts
    grading_isolation: grading_sandbox.Isolation  # for instructors: what `course grade` uses
    grading_limits: grading_cgroups.ResourceControl  # and the limits it sets per submission
    torch: TorchFacts | None = None
    device: DeviceFacts | None = None
    accelerators: list[Accelerator] = field(default_factory=list)
    no_accelerator_reason: str | None = None
    advice: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form; without PyTorch, only the facts gathered without it."""
        facts = asdict(self)
        facts["grading_limits"] = self.grading_limits.as_dict()  # with "enforced"
        if self.torch is None:
            for key in ("torch", "device", "accelerators", "no_accelerator_reason", "advice"):
                del facts[key]
        return facts


# ------------------------------------------------------------------ gathering the facts

def _start_method() -> StartMethod:
    """The multiprocessing start method, read without fixing it as a side effect."""
    chosen = multiprocessing.get_start_method(allow_none=True)
    # The first entry is the platform's default (documented); asking
    # get_start_method() without allow_none would *set* the context.
    default = multiprocessing.get_all_start_methods()[0]
    return StartMethod(chosen or default, chosen is not None)


def _cuda_devices(torch: Any) -> list[Accelerator]:
    devices = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        devices.append(Accelerator(
            device=f"cuda:{index}",
            index=index,
            name=props.name,
            memory_gib=round(props.total_memory / 2**30, 2),
            capability=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            # The rule torch.cuda.is_bf16_supported(including_emulation=False) applies
            # to the *current* device, applied to each device: native bf16 needs
            # compute capability 8.0 (Ampere) or newer; ROCm GPUs support it.
            bf16=bool(torch.version.hip) or props.major >= 8,
        ))
    return devices


def _mps_device(torch: Any) -> Accelerator:
    try:
        memory = round(torch.mps.recommended_max_memory() / 2**30, 2)
    except Exception:  # noqa: BLE001 - older macOS/PyTorch: not reported
        memory = None
    try:
        torch.ones(1, dtype=torch.bfloat16, device="mps")
        bf16 = True
    except Exception:  # noqa: BLE001 - bf16 on MPS needs macOS 14 or newer
        bf16 = False
    return Accelerator("mps", 0, "Apple MPS", memory, None, None, bf16)


def _other_accelerator(torch: Any, device_type: str) -> list[Accelerator]:
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
        devices.append(Accelerator(f"{device_type}:{index}", index, name, None, None, None, None))
    return devices


def _accelerators(torch: Any) -> list[Accelerator]:
    found: list[Accelerator] = []
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
            f"When data loading is the bottleneck, measure a few num_workers values (lesson 04): "
            f"loading that computes (decoding, augmenting) gains up to about one worker per "
            f"core ({cpu_count} here); loading that waits for a disk or a network can gain "
            "from more.")
    else:
        advice.append("One CPU core: start with num_workers=0; workers help only loading that "
                      "waits for a disk or a network.")
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


def examine() -> Report:
    """Every fact the report shows; ``ok`` is False when the environment does not work."""
    start = _start_method()
    basics = {
        "python": PythonFacts(platform.python_version(), sys.executable),
        "platform": PlatformFacts(platform.system(), platform.release(), platform.machine()),
        "packages": {name: _version(name) for name in PACKAGES},
        "multiprocessing": start,
        "grading_isolation": grading_sandbox.detect(),
        "grading_limits": grading_cgroups.detect(),
    }
    try:
        import torch
    except ImportError as error:
        return Report(ok=False, error=(
            f"PyTorch cannot be imported in {sys.executable} ({error}); install the course "
            "requirements (make install) and use that environment."),
            cpu=CpuFacts(None, os.cpu_count()), **basics)

    from ..lab.devices import available_devices, explain_device

    # Read before anything below touches CUDA (asking for device properties initialises it).
    cuda_initialized = bool(torch.cuda.is_initialized())
    torch_facts = TorchFacts(torch.__version__, torch.version.cuda, torch.version.hip,
                             bool(torch.backends.mps.is_built()), cuda_initialized)
    cpu = CpuFacts(torch.get_num_threads(), os.cpu_count())
    error = None
    try:
        choice = explain_device()
        picked, reason, device_type = str(choice.device), choice.reason, choice.device.type
    except ValueError as refused:
        error, picked, reason, device_type = str(refused), None, None, None
    accelerators = _accelerators(torch)
    return Report(
        ok=error is None, error=error, cpu=cpu, torch=torch_facts,
        device=DeviceFacts(picked, reason, available_devices()),
        accelerators=accelerators,
        no_accelerator_reason=None if accelerators else _why_no_accelerator(torch),
        advice=_advice(basics["platform"].system, start.method, device_type, cuda_initialized,
                       cpu.os_cpu_count),
        **basics)


def collect() -> dict[str, Any]:
    """:func:`examine`'s report as the JSON-able dict ``course doctor --json`` prints."""
    return examine().as_dict()


# ------------------------------------------------------------------ showing them

def _format_accelerator(entry: Accelerator) -> str:
    parts = [f"{entry.device:<8}", entry.name or "(unnamed)"]
    if entry.memory_gib is not None:
        parts.append(f"{entry.memory_gib:.1f} GiB")
    if entry.capability is not None:
        parts.append(f"capability {entry.capability}")
    if entry.sm_count is not None:
        parts.append(f"{entry.sm_count} SMs")
    if entry.bf16 is not None:
        parts.append("bf16 " + ("yes" if entry.bf16 else "no"))
    return "  " + "  ".join(parts)


def _build(facts: TorchFacts) -> str:
    if facts.cuda_build:
        return f"CUDA {facts.cuda_build}"
    if facts.hip_build:
        return f"ROCm {facts.hip_build}"
    return "MPS build" if facts.mps_built else "CPU-only build"


def _device_lines(report: Report) -> list[str]:
    device = report.device
    lines = ["", "Device"]
    if device.picked is not None:
        lines.append(f"  get_device() picks {device.picked}: {device.reason}.")
    else:
        lines.append("  get_device() fails (see the error below).")
    lines.append(f"  Available here: {', '.join(device.available)}")
    lines += ["", "Accelerators"]
    if report.accelerators:
        lines += [_format_accelerator(entry) for entry in report.accelerators]
    else:
        lines.append(f"  none: {report.no_accelerator_reason}")
    return lines


def format_report(report: Report) -> str:
    """The report as short, readable text."""
    lines = ["course doctor: is this environment ready for the course?", "", "Software"]
    lines.append(f"  {'Python':<12} {report.python.version}  ({report.python.executable})")
    for name, label in PACKAGES.items():
        version = report.packages[name]
        if name == "torch" and report.torch:
            version = f"{report.torch.version}  ({_build(report.torch)})"
        lines.append(f"  {label:<12} {version}")
    if report.torch:
        lines += _device_lines(report)

    lines += ["", "CPU and processes"]
    if report.cpu.torch_threads is not None:
        lines.append(f"  PyTorch uses {report.cpu.torch_threads} thread(s); "
                     f"os.cpu_count() = {report.cpu.os_cpu_count}")
    start = report.multiprocessing
    lines.append(f"  multiprocessing start method: {start.method}"
                 + ("" if start.explicitly_set else " (the default here)"))
    if report.torch:
        lines.append("  CUDA already initialised in this process: "
                     + ("yes" if report.torch.cuda_initialized else "no"))

    if report.advice:
        lines += ["", f"Advice for {report.platform.system or 'this system'}"]
        lines += [f"  - {item}" for item in report.advice]
    isolation = report.grading_isolation
    lines += ["", "Grading (instructors)", f"  isolation: {isolation.description}"]
    if not isolation.sandboxed:
        lines.append(f"  `course grade` needs it: {isolation.problem}")
    resources = report.grading_limits
    lines.append(f"  limits per submission: {resources.description}")
    if not resources.enforced:
        lines.append(f"  `course grade` needs them: {resources.problem}")
    lines += ["", "Verdict: " + ("ready." if report.ok else f"NOT ready: {report.error}")]
    return "\n".join(lines)


def main(as_json: bool = False, stream: TextIO | None = None) -> int:
    """Print the report to ``stream`` (default: sys.stdout); return the exit status."""
    stream = sys.stdout if stream is None else stream
    report = examine()
    if as_json:
        stream.write(json.dumps(report.as_dict(), indent=2) + "\n")
    else:
        stream.write(format_report(report) + "\n")
    stream.flush()
    if report.ok:
        return EXIT_OK
    if as_json:  # stdout is data for a program; the text report already ends with the reason
        message = " ".join(str(report.error).split())  # exactly one line
        print(f"course doctor: {message}", file=sys.stderr)
    return EXIT_NO_TORCH if report.torch is None else EXIT_NO_DEVICE


if __name__ == "__main__":
    sys.exit(main(as_json="--json" in sys.argv[1:]))
