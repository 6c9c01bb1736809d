"""The typed records of ``course doctor``'s report; ``Report.as_dict()`` is the ``--json`` form.

Field order is the order of the --json output. Nothing here imports PyTorch: the report must
be built, and printed, where PyTorch cannot be imported.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..grading import cgroups as grading_cgroups
from ..grading import sandbox as grading_sandbox

NOT_INSTALLED = "not installed"


@dataclass(frozen=True)
class Package:
    """A distribution the report lists, and for whom it is there."""

    distribution: str  # 'nbval'
    label: str  # 'nbval'
    tests_only: bool = False  # only instructors and the course's tests need it


#: What the report lists, in order: what learners need, then what only instructors and the
#: course's tests use (the notebooks' nbval runs, pytest, the browser tests' playwright).
PACKAGES = (
    Package("torch", "PyTorch"),
    Package("jupyterlab", "JupyterLab"),
    Package("nbgrader", "nbgrader"),
    Package("nbval", "nbval", tests_only=True),
    Package("pytest", "pytest", tests_only=True),
    Package("playwright", "playwright", tests_only=True),
)


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
    load_average: float | None = None  # runnable processes over the last minute; None: unknown
    oversubscribed: bool = False  # more work than cores: timings are noisy, threads compete


@dataclass(frozen=True)
class TorchFacts:
    version: str
    cuda_build: str | None
    hip_build: str | None
    mps_built: bool
    cuda_initialized: bool  # before the doctor touched CUDA
    tested_range: str | None = None  # pyproject's torch requirement: '<2.16,>=2.11'
    outside_tested_range: bool = False


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
class CompilerFacts:
    """Whether ``torch.compile``'s default backend (Inductor) can build code for a device."""

    device: str  # 'cpu' (its C++ compiler), then the device get_device() picks
    ready: bool
    reason: str  # what builds the code, or what to install


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
    compiler: list[CompilerFacts] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The JSON form; without PyTorch, only the facts gathered without it."""
        facts = asdict(self)
        facts["grading_limits"] = self.grading_limits.as_dict()  # with "enforced"
        if self.torch is None:
            for key in ("torch", "device", "accelerators", "no_accelerator_reason", "compiler",
                        "advice"):
                del facts[key]
        return facts
