"""``course doctor``'s report as text, and the advice it gives."""
from __future__ import annotations

from .doctor_records import PACKAGES, Accelerator, CpuFacts, Report, TorchFacts


def _busy(cpu: CpuFacts) -> list[str]:
    """Advice for a machine with more work than cores (7 engineers on 2 cores, a shared node)."""
    if not cpu.oversubscribed:
        return []
    return [(f"This machine is busy: a load average of {cpu.load_average:.1f} on "
             f"{cpu.os_cpu_count} core(s). Timings will be noisy and PyTorch's "
             f"{cpu.torch_threads or 'many'} threads compete for the cores: call "
             "torch.set_num_threads(1) at the top of a notebook, and re-run a figure on a "
             "quiet machine before you trust it.")]


def advice(system: str, start_method: str, device_type: str | None, pinned_copies: bool,
           cuda_initialized: bool, cpu: CpuFacts) -> list[str]:
    """What to do about what the report found, one sentence or two each. ``pinned_copies``:
    the backend table's word on whether pinned memory speeds copies to ``device_type``."""
    advice = _busy(cpu)
    cpu_count = cpu.os_cpu_count
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
    if pinned_copies:
        advice.append(
            f"pin_memory=True in the DataLoader speeds up host-to-{device_type} copies here "
            "(pair it with .to(device, non_blocking=True)).")
    else:
        advice.append(
            "pin_memory only helps when copying to a GPU with its own memory (CUDA, XPU): "
            f"leave it False on {device_type or 'this machine'}.")
    if system == "Windows":
        advice.append("On Windows, run scripts with DataLoader workers from a terminal, "
                      "not from an interactive interpreter.")
    return advice


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
    for package in PACKAGES:
        version = report.packages[package.distribution]
        if package.distribution == "torch" and report.torch:
            version = f"{report.torch.version}  ({_build(report.torch)})"
        audience = "  (instructors/tests only)" if package.tests_only else ""
        lines.append(f"  {package.label:<12} {version}{audience}")
    if report.torch and report.torch.outside_tested_range:
        lines.append(f"  {'':<12} outside the versions this course is tested with "
                     f"(torch{report.torch.tested_range}): lessons may warn or fail; "
                     f"`make install` gives the tested one")
    if report.torch:
        lines += _device_lines(report)
        lines += ["", "torch.compile (Inductor)"]
        lines += [f"  {facts.device:<8} {'ready' if facts.ready else 'NOT ready'}: "
                  f"{facts.reason}" for facts in report.compiler]

    lines += ["", "CPU and processes"]
    if report.cpu.torch_threads is not None:
        lines.append(f"  PyTorch uses {report.cpu.torch_threads} thread(s); "
                     f"os.cpu_count() = {report.cpu.os_cpu_count}")
    if report.cpu.load_average is not None:
        busy = "busy: more work than cores" if report.cpu.oversubscribed else "not oversubscribed"
        lines.append(f"  load average (1 min): {report.cpu.load_average:.2f} on "
                     f"{report.cpu.os_cpu_count} core(s), {busy}")
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
