"""``course doctor``: is this Python ready for the course, and which device will it use?

:func:`examine` gathers the facts as a :class:`Report` (typed records, in
:mod:`.doctor_records`; ``as_dict()`` is the ``--json`` form, which :func:`collect` returns);
:func:`main` prints them as a short report (:mod:`.doctor_text`) or as JSON and returns the
exit status:

* 0 -- the environment works (PyTorch imports, the device request can be met);
* 1 -- PyTorch cannot be imported;
* 2 -- a requested device (``COURSE_DEVICE``) is not available here.

On failure exactly one line, starting ``course doctor:``, goes to stderr. What the doctor asks
PyTorch (the accelerators, the compiler) is in :mod:`.doctor_torch`.

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

from ..grading import cgroups as grading_cgroups
from ..grading import sandbox as grading_sandbox
from .doctor_records import (
    NOT_INSTALLED,
    PACKAGES,
    CpuFacts,
    DeviceFacts,
    PlatformFacts,
    PythonFacts,
    Report,
    StartMethod,
    TorchFacts,
)
from .doctor_text import advice, format_report

__all__ = ["EXIT_NO_DEVICE", "EXIT_NO_TORCH", "EXIT_OK", "NOT_INSTALLED", "PACKAGES", "Report",
           "StartMethod", "collect", "examine", "format_report", "main", "tested_torch_range",
           "torch_outside_tested_range"]

EXIT_OK, EXIT_NO_TORCH, EXIT_NO_DEVICE = 0, 1, 2


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return NOT_INSTALLED


# ------------------------------------------------------------------ gathering the facts

def _start_method() -> StartMethod:
    """The multiprocessing start method, read without fixing it as a side effect."""
    chosen = multiprocessing.get_start_method(allow_none=True)
    # The first entry is the platform's default (documented); asking
    # get_start_method() without allow_none would *set* the context.
    default = multiprocessing.get_all_start_methods()[0]
    return StartMethod(chosen or default, chosen is not None)


def _load_average() -> float | None:
    """Runnable processes over the last minute (os.getloadavg); None where there is none
    (Windows)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def cpu_facts(torch_threads: int | None) -> CpuFacts:
    """Cores, PyTorch's threads, and whether more work is waiting than there are cores."""
    cores, load = os.cpu_count(), _load_average()
    return CpuFacts(torch_threads, cores, load,
                    oversubscribed=load is not None and cores is not None and load > cores)


def examine() -> Report:
    """Every fact the report shows; ``ok`` is False when the environment does not work."""
    start = _start_method()
    basics = {
        "python": PythonFacts(platform.python_version(), sys.executable),
        "platform": PlatformFacts(platform.system(), platform.release(), platform.machine()),
        "packages": {package.distribution: _version(package.distribution)
                     for package in PACKAGES},
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
            cpu=cpu_facts(None), **basics)

    # Only now that PyTorch imports: these import it at their top.
    from ..lab.backends import backend_for
    from ..lab.devices import available_devices, explain_device
    from . import doctor_torch

    # Read before anything below touches CUDA (asking for device properties initialises it).
    cuda_initialized = bool(torch.cuda.is_initialized())
    tested = tested_torch_range()
    torch_facts = TorchFacts(torch.__version__, torch.version.cuda, torch.version.hip,
                             bool(torch.backends.mps.is_built()), cuda_initialized, tested,
                             torch_outside_tested_range(torch.__version__, tested))
    cpu = cpu_facts(torch.get_num_threads())
    error, picked = None, None
    try:
        choice = explain_device()
        picked, reason = choice.device, choice.reason
    except ValueError as refused:
        error, reason = str(refused), None
    accelerators = doctor_torch.accelerators(torch)
    return Report(
        ok=error is None, error=error, cpu=cpu, torch=torch_facts,
        device=DeviceFacts(None if picked is None else str(picked), reason, available_devices()),
        accelerators=accelerators,
        no_accelerator_reason=None if accelerators else doctor_torch.why_no_accelerator(torch),
        compiler=doctor_torch.compiler(torch, picked),
        advice=advice(basics["platform"].system, start.method,
                      None if picked is None else picked.type,
                      picked is not None and backend_for(picked).pinned_copies,
                      cuda_initialized, cpu),
        **basics)


def collect() -> dict[str, Any]:
    """:func:`examine`'s report as the JSON-able dict ``course doctor --json`` prints."""
    return examine().as_dict()


def tested_torch_range() -> str | None:
    """The PyTorch versions the course is tested with, as its package declares: '<2.16,>=2.11'."""
    try:
        requirements = metadata.requires("gpu-course") or []
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return None
    from packaging.requirements import Requirement

    for line in requirements:
        requirement = Requirement(line)
        if requirement.name == "torch":
            return str(requirement.specifier) or None
    return None


def torch_outside_tested_range(version: str, tested: str | None) -> bool:
    """True when ``version`` (local labels such as '+cu130' ignored) is outside ``tested``."""
    if not tested:
        return False
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    return Version(version).public not in SpecifierSet(tested)


# ------------------------------------------------------------------ showing them

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
