"""``course doctor``: the report on this CPU machine, its failures, and a simulated GPU box."""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import types

import pytest
import torch

from course_utils.checks import machines
from course_utils.probe import SimulatedMachine
from course_utils.tools import doctor, doctor_text, doctor_torch
from course_utils.tools.doctor_records import CpuFacts

H100 = {"name": "NVIDIA H100 80GB HBM3", "total_memory": 85_045_231_616, "major": 9, "minor": 0,
        "multi_processor_count": 132}
T4 = {"name": "Tesla T4", "total_memory": 15_835_660_288, "major": 7, "minor": 5,
      "multi_processor_count": 40}


# What this machine has, without any simulation: the "this machine" tests need no accelerator.
NO_ACCELERATOR = torch.accelerator.current_accelerator(check_available=True) is None




def run_main(as_json=False):
    out = io.StringIO()
    status = doctor.main(as_json=as_json, stream=out)
    return status, out.getvalue()


def index_of(device) -> int:
    """The GPU a torch.cuda query names: None (the current one, 0 here), an int or a device."""
    if device is None or isinstance(device, int):
        return device or 0
    return torch.device(device).index or 0


def simulate_gpus(monkeypatch, specs, *, initialized=False):
    """Make torch report ``specs`` as CUDA GPUs, the way a CUDA machine would."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: bool(specs))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(specs))
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: initialized)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device=None: types.SimpleNamespace(**specs[index_of(device)]))
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setattr(torch.accelerator, "current_accelerator",
                        lambda check_available=False: torch.device("cuda") if specs else None)
    monkeypatch.setattr(torch.accelerator, "current_device_index", lambda: 0)
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.version, "hip", None)


# ------------------------------------------------------------------ this CPU machine

@pytest.mark.skipif(not NO_ACCELERATOR, reason="describes a machine without an accelerator")
def test_text_report_on_this_cpu_machine(capsys):
    status, text = run_main()
    assert status == 0
    assert capsys.readouterr().err == ""
    for fact in ("Python", "PyTorch", torch.__version__, "nbgrader", "nbval", "JupyterLab",
                 "get_device() picks cpu", "no accelerator is available",
                 "Available here: cpu", "multiprocessing start method",
                 "CUDA already initialised in this process: no", "pin_memory",
                 "num_workers", "Verdict: ready."):
        assert fact in text, fact
    assert doctor.collect()["no_accelerator_reason"] in text  # why there is no accelerator


@pytest.mark.skipif(not NO_ACCELERATOR, reason="describes a machine without an accelerator")
def test_json_report_has_the_same_facts():
    status, text = run_main(as_json=True)
    assert status == 0
    report = json.loads(text)
    assert report["ok"] is True and report["error"] is None
    assert report["packages"]["torch"].split("+")[0] == torch.__version__.split("+")[0]
    assert set(report["packages"]) == {"torch", "nbgrader", "nbval", "jupyterlab", "pytest",
                                       "playwright"}
    assert report["device"] == {"picked": "cpu",
                                "reason": "no accelerator is available, so the CPU is used",
                                "available": ["cpu"]}
    assert report["accelerators"] == []
    assert report["no_accelerator_reason"]
    load = os.getloadavg()[0]
    assert report["cpu"] == {"torch_threads": torch.get_num_threads(),
                             "os_cpu_count": os.cpu_count(),
                             "load_average": pytest.approx(load, abs=2),
                             "oversubscribed": report["cpu"]["load_average"] > os.cpu_count()}
    assert [facts["device"] for facts in report["compiler"]] == ["cpu"]
    assert report["multiprocessing"]["method"] in ("fork", "spawn", "forkserver")
    assert report["torch"]["cuda_initialized"] is False
    assert any("pin_memory" in item for item in report["advice"])
    assert report == json.loads(json.dumps(report))  # plain JSON all the way down


def test_collect_does_not_fix_the_start_method():
    import multiprocessing

    before = multiprocessing.get_start_method(allow_none=True)
    doctor.collect()
    assert multiprocessing.get_start_method(allow_none=True) == before


def test_missing_package_is_reported_not_fatal(monkeypatch):
    real = doctor.metadata.version

    def version(name):
        if name == "nbval":
            raise doctor.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(doctor.metadata, "version", version)
    report = doctor.collect()
    assert report["packages"]["nbval"] == "not installed"
    assert report["ok"] is True


# ------------------------------------------------------------------ failures

@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_requested_device_missing_exits_non_zero_and_says_so_once(monkeypatch, capsys):
    monkeypatch.setenv("COURSE_DEVICE", "cuda")
    status, text = run_main()
    assert status == doctor.EXIT_NO_DEVICE != 0
    assert capsys.readouterr().err == ""  # the verdict says it; a terminal shows it once
    verdict = text.splitlines()[-1]
    assert verdict.startswith("Verdict: NOT ready: ") and "'cuda'" in verdict
    assert "cpu" in verdict.split("Available here:")[1]
    assert text.count("'cuda'") == 1

    status, text = run_main(as_json=True)
    assert status == doctor.EXIT_NO_DEVICE
    report = json.loads(text)
    assert report["ok"] is False and "cuda" in report["error"]
    assert report["device"]["picked"] is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("course doctor: ") and "'cuda'" in err


@pytest.mark.parametrize("value, expected", [
    ("meta", "holds shapes but no data"),
    ("gpu", "Did you mean 'cuda'"),
])
def test_course_device_mistakes_are_explained(monkeypatch, value, expected):
    monkeypatch.setenv("COURSE_DEVICE", value)
    status, text = run_main()
    assert status == doctor.EXIT_NO_DEVICE
    assert expected in text.splitlines()[-1] and "ready." not in text.splitlines()[-1]


def test_course_device_in_capitals_is_accepted(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "CPU")
    status, text = run_main()
    assert status == doctor.EXIT_OK and text.splitlines()[-1] == "Verdict: ready."


def test_torch_missing_exits_non_zero_with_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    status, text = run_main()
    assert status == doctor.EXIT_NO_TORCH != 0
    assert capsys.readouterr().err == ""
    assert "Python" in text and "NOT ready: PyTorch cannot be imported" in text

    status, text = run_main(as_json=True)
    report = json.loads(text)
    assert report["ok"] is False and "torch" not in report
    assert status == doctor.EXIT_NO_TORCH


def test_command_line_exit_status_and_stderr():
    env = dict(os.environ, COURSE_DEVICE="cuda:99")
    result = subprocess.run([sys.executable, "-m", "course_utils.tools.doctor", "--json"],
                            check=False, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == doctor.EXIT_NO_DEVICE
    assert result.stderr.count("\n") == 1 and "'cuda:99'" in result.stderr
    assert json.loads(result.stdout)["ok"] is False


# ------------------------------------------------------------------ simulated accelerators

def test_two_simulated_gpus(monkeypatch, capsys):
    simulate_gpus(monkeypatch, [H100, T4])
    report = doctor.collect()
    assert report["ok"] is True
    assert report["device"]["picked"] == "cuda:0"
    assert "cuda" in report["device"]["reason"]
    assert report["device"]["available"] == ["cuda:0", "cuda:1", "cpu"]
    assert report["accelerators"] == [
        {"device": "cuda:0", "index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_gib": 79.2,
         "capability": "9.0", "sm_count": 132, "bf16": True},
        {"device": "cuda:1", "index": 1, "name": "Tesla T4", "memory_gib": 14.75,
         "capability": "7.5", "sm_count": 40, "bf16": False},
    ]
    assert report["no_accelerator_reason"] is None
    assert any("pin_memory=True" in item for item in report["advice"])

    status, text = run_main()
    assert status == 0 and capsys.readouterr().err == ""
    assert "NVIDIA H100 80GB HBM3" in text and "79.2 GiB" in text
    assert "capability 9.0" in text and "132 SMs" in text and "bf16 yes" in text
    assert "Tesla T4" in text and "bf16 no" in text
    assert "CUDA 12.8" in text


def test_second_gpu_requested_by_environment(monkeypatch):
    simulate_gpus(monkeypatch, [H100, T4])
    monkeypatch.setenv("COURSE_DEVICE", "cuda:1")
    report = doctor.collect()
    assert report["device"]["picked"] == "cuda:1"
    assert "COURSE_DEVICE" in report["device"]["reason"]


def test_missing_third_gpu_is_an_error(monkeypatch, capsys):
    simulate_gpus(monkeypatch, [H100, T4])
    monkeypatch.setenv("COURSE_DEVICE", "cuda:2")
    status, text = run_main()
    assert status == doctor.EXIT_NO_DEVICE
    verdict = text.splitlines()[-1]
    assert "'cuda:2'" in verdict and "cuda:0, cuda:1, cpu" in verdict


def test_cuda_already_initialised_is_reported(monkeypatch):
    simulate_gpus(monkeypatch, [H100], initialized=True)
    monkeypatch.setattr(doctor, "_start_method", lambda: doctor.StartMethod("fork", False))
    report = doctor.collect()
    assert report["torch"]["cuda_initialized"] is True
    assert any("Cannot re-initialize CUDA" in item for item in report["advice"])


# ------------------------------------------------------------------ why no accelerator

def simulate_driver(monkeypatch, smi_output=None, *, returncode=0, raises=None):
    """nvidia-smi as a machine would have it: absent (None), failing, or printing a version."""
    calls = []

    def run(command, **kwargs):
        calls.append(command)
        if raises is not None:
            raise raises
        return subprocess.CompletedProcess(command, returncode, smi_output, "")

    monkeypatch.setattr(shutil, "which", lambda name: None if smi_output is None and
                        raises is None else f"/usr/bin/{name}")
    monkeypatch.setattr(subprocess, "run", run)
    return calls


def cpu_only_build(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(sys, "platform", "linux")


def cuda_build(monkeypatch, version):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    simulate_gpus(monkeypatch, [])
    monkeypatch.setattr(torch.version, "cuda", version)


def test_cpu_only_build_is_named_as_the_cause(monkeypatch):
    cpu_only_build(monkeypatch)
    calls = simulate_driver(monkeypatch, None)
    reason = doctor_torch.why_no_accelerator(torch)
    assert "CPU-only" in reason and "torch.version.cuda is None" in reason
    assert "NVIDIA driver here" not in reason and calls == []


@pytest.mark.parametrize(("platform", "said", "not_said"), [
    ("win32", "On Windows the default `pip install torch` is CPU-only", "TORCH_INDEX"),
    ("linux", "without TORCH_INDEX=.../whl/cpu", "Windows")])
def test_cpu_only_build_advice_is_for_this_os(monkeypatch, platform, said, not_said):
    cpu_only_build(monkeypatch)
    simulate_driver(monkeypatch, None)
    monkeypatch.setattr(doctor.sys, "platform", platform)
    reason = doctor_torch.why_no_accelerator(torch)
    assert said in reason and not_said not in reason


def test_worker_advice_does_not_name_fewer_workers_than_lesson_04_measures():
    advice = " ".join(doctor_text.advice("Linux", "fork", None, False, False, CpuFacts(2, 2)))
    assert "num_workers=1" not in advice and "measure a few num_workers values" in advice


def test_cpu_only_build_on_a_machine_with_a_driver_says_so(monkeypatch):
    cpu_only_build(monkeypatch)
    simulate_driver(monkeypatch, "580.82.07\n")
    reason = doctor_torch.why_no_accelerator(torch)
    assert "CPU-only" in reason and "There is an NVIDIA driver here" in reason


def test_cuda_build_without_a_driver(monkeypatch):
    cuda_build(monkeypatch, "13.0")
    simulate_driver(monkeypatch, None)
    report = doctor.collect()
    assert report["accelerators"] == []
    reason = report["no_accelerator_reason"]
    assert "built with CUDA 13.0" in reason and "no NVIDIA driver here" in reason
    assert "CPU-only" not in reason


@pytest.mark.parametrize(("cuda", "driver", "needed"), [
    ("13.0", "570.133.20", 580),  # a CUDA 12.8 driver: too old for the PyPI default wheel
    ("12.6", "470.256.02", 525),
])
def test_cuda_build_with_a_driver_too_old(monkeypatch, cuda, driver, needed):
    cuda_build(monkeypatch, cuda)
    calls = simulate_driver(monkeypatch, f"{driver}\n{driver}\n")  # one line per GPU
    reason = doctor_torch.why_no_accelerator(torch)
    assert f"driver {driver} is too old" in reason
    assert f"CUDA {cuda.split('.')[0]}.x builds need driver {needed} or newer" in reason
    assert calls[0][1:] == ["--query-gpu=driver_version", "--format=csv,noheader"]


@pytest.mark.parametrize(("cuda", "driver"), [("13.0", "580.65.06"), ("12.6", "570.133.20")])
def test_cuda_build_with_a_recent_driver_but_no_gpu(monkeypatch, cuda, driver):
    """CUDA minor version compatibility: a 12.x build runs on any 525+ driver."""
    cuda_build(monkeypatch, cuda)
    simulate_driver(monkeypatch, f"{driver}\n")
    reason = doctor_torch.why_no_accelerator(torch)
    assert f"built with CUDA {cuda} and the NVIDIA driver {driver} is installed" in reason
    assert "too old" not in reason


@pytest.mark.parametrize("failure", [
    {"smi_output": "No devices were found\n", "returncode": 6},
    {"raises": subprocess.TimeoutExpired("nvidia-smi", 30)},
    {"raises": PermissionError("permission denied")},
])
def test_cuda_build_with_a_failing_driver(monkeypatch, failure):
    cuda_build(monkeypatch, "13.0")
    simulate_driver(monkeypatch, **failure)
    reason = doctor_torch.why_no_accelerator(torch)
    assert "nvidia-smi is installed but fails" in reason and "not working" in reason
    if "smi_output" in failure:
        assert "(No devices were found)" in reason


def test_hidden_gpus_are_named(monkeypatch):
    cuda_build(monkeypatch, "13.0")
    simulate_driver(monkeypatch, "580.65.06\n")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert "CUDA_VISIBLE_DEVICES" in doctor.collect()["no_accelerator_reason"]


def test_simulated_mac(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "current_accelerator",
                        lambda check_available=False: torch.device("mps"))
    monkeypatch.setattr(torch.accelerator, "current_device_index", lambda: 0)
    monkeypatch.setattr(doctor, "_start_method", lambda: doctor.StartMethod("spawn", False))
    report = doctor.collect()
    assert report["device"]["picked"] == "mps:0"  # as MPS tensors report their device
    assert [entry["name"] for entry in report["accelerators"]] == ["Apple GPU (MPS)"]
    assert [(facts["device"], facts["ready"]) for facts in report["compiler"]][1] == ("mps:0",
                                                                                     True)
    advice = " ".join(report["advice"])
    assert 'if __name__ == "__main__":' in advice and "num_workers=0" in advice
    assert "leave it False" in advice


# ------------------------------------------------------------------ grading isolation

def test_report_says_which_grading_isolation_is_in_force(grading_sandbox):
    """Checks the report names the sandbox `course grade` will use, text and JSON alike."""
    status, text = run_main()
    assert status == 0
    assert f"isolation: {grading_sandbox.description}" in text
    assert doctor.collect()["grading_isolation"]["sandboxed"] is True


def test_report_says_how_to_install_the_sandbox_where_it_is_missing(tmp_path):
    """Checks a machine without bwrap gets the install command, and stays ready for learners."""
    done = subprocess.run([sys.executable, "-m", "course_utils", "doctor"], check=False, text=True,
                          capture_output=True, env={**os.environ, "PATH": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert "isolation: none: bubblewrap (bwrap) is not installed" in done.stdout
    assert "sudo apt-get install bubblewrap" in done.stdout


# ------------------------------------------------------------------ the tested PyTorch range

def test_the_tested_range_is_pyprojects():
    """Checks the doctor reads the tested range from the installed course's own declaration."""
    import tomllib
    from packaging.requirements import Requirement

    from .conftest import ROOT

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch_line = next(Requirement(line) for line in declared if Requirement(line).name == "torch")
    assert doctor.tested_torch_range() == str(torch_line.specifier)
    assert doctor.tested_torch_range() == "<2.16,>=2.11"


@pytest.mark.parametrize("version, outside", [
    ("2.10.0", True), ("2.11.0", False), ("2.13.0+cpu", False), ("2.15.0+cu130", False),
    ("2.16.0", True), ("2.16.0.dev20261101+cpu", True)])
def test_versions_outside_the_range_are_flagged(version, outside):
    """Checks local labels (+cpu, +cu130) are ignored and both ends of the range hold."""
    assert doctor.torch_outside_tested_range(version, "<2.16,>=2.11") is outside


def test_report_says_when_torch_is_outside_the_tested_range(monkeypatch):
    """Checks the text report names the installed version as untested, and the range."""
    monkeypatch.setattr(torch, "__version__", "2.10.0+cpu")
    text = doctor.format_report(doctor.examine())
    assert "2.10.0+cpu" in text
    assert "outside the versions this course is tested with (torch<2.16,>=2.11)" in text
    monkeypatch.setattr(torch, "__version__", "2.13.0+cpu")
    assert "outside the versions" not in doctor.format_report(doctor.examine())


# ------------------------------------------------------------------ the backend table's answers

def test_a_simulated_xpu_machine_is_described_by_its_backend(monkeypatch):
    """An XPU, a type the table does not name: its name, memory and bfloat16 from torch.xpu
    and torch.accelerator (the doctor listed it unnamed, without memory or bf16, before)."""
    monkeypatch.setattr(doctor, "_start_method", lambda: doctor.StartMethod("fork", False))
    with SimulatedMachine(machines.XPU):
        report = doctor.collect()
    assert report["ok"] is True and report["device"]["picked"] == "xpu:0"
    assert report["accelerators"] == [
        {"device": "xpu:0", "index": 0, "name": "Intel(R) Data Center GPU Max 1550",
         "memory_gib": 63.98, "capability": None, "sm_count": None, "bf16": True}]
    assert report["no_accelerator_reason"] is None
    assert [facts["device"] for facts in report["compiler"]] == ["cpu", "xpu:0"]
    assert "pin_memory=True in the DataLoader speeds up host-to-xpu copies" in \
        " ".join(report["advice"])


def test_the_doctor_and_amp_policy_apply_one_bf16_rule(monkeypatch):
    """`course doctor` says 'bf16 yes' exactly where amp_policy hands out bfloat16."""
    from course_utils import precision

    t4_and_a100 = machines.machine("a T4 and an A100", {"cuda": ["T4", "A100"]})
    with SimulatedMachine(t4_and_a100):
        said = [entry.bf16 for entry in doctor_torch.accelerators(torch)]
        policies = [precision.amp_policy(f"cuda:{index}").dtype for index in (0, 1)]
    assert said == [False, True]
    assert policies == [torch.float16, torch.bfloat16]


def test_the_report_says_whether_torch_compile_can_build_here(monkeypatch):
    """Checks the compiler section: the CPU's C++ compiler, found or missing, from the table."""
    from course_utils.lab import backends

    monkeypatch.setattr(backends.shutil, "which", lambda name: f"/usr/bin/{name}")
    text = doctor.format_report(doctor.examine())
    assert "torch.compile (Inductor)" in text and "cpu      ready: Inductor generates C++" in text
    monkeypatch.setattr(backends.shutil, "which", lambda name: None)
    report = doctor.examine()
    assert report.compiler[0].ready is False
    assert "cpu      NOT ready: Inductor generates C++ for the CPU and needs a C++ compiler" in \
        doctor.format_report(report)


@pytest.mark.parametrize("load, busy", [(0.5, False), (9.0, True)])
def test_the_report_says_how_busy_the_machine_is(monkeypatch, load, busy):
    """Checks the load average against the cores, and set_num_threads(1) when oversubscribed."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    report = doctor.examine()
    assert (report.cpu.load_average, report.cpu.oversubscribed) == (load, busy)
    text = doctor.format_report(report)
    assert f"load average (1 min): {load:.2f} on 2 core(s)" in text
    assert ("torch.set_num_threads(1)" in text) is busy
    assert ("busy: more work than cores" in text) is busy


def test_test_only_tools_are_marked_for_instructors(monkeypatch):
    text = doctor.format_report(doctor.examine())
    lines = {line.split()[0]: line for line in text.splitlines()[3:10] if line.strip()}
    for tool in ("nbval", "pytest", "playwright"):
        assert lines[tool].endswith("(instructors/tests only)"), lines[tool]
    assert not lines["PyTorch"].endswith("(instructors/tests only)")
    assert not lines["JupyterLab"].endswith("(instructors/tests only)")


def test_the_doctor_imports_without_pytorch():
    """Checks the split modules keep PyTorch out of the doctor's import: it reports its absence."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "from course_utils.tools import doctor\n"
            "sys.exit(doctor.main())")
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == doctor.EXIT_NO_TORCH, done.stderr
    assert "NOT ready: PyTorch cannot be imported" in done.stdout
