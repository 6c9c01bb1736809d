"""`make gpu-check` on a simulated GPU machine: its own PyTorch, no index, none of our packages.

The machine is a fresh venv that has its own torch before the course arrives, the way the GPU
machines' image has it (linked from this interpreter's installation: see install_by_links), so
"a PyTorch that is not the course's" means not the course's environment: a separate one that
the course must use in place, never reinstall. The course is then installed from a wheels folder
that `gpu_check.py wheels` prepared (no torch in it) with --no-index, so any attempt to install
or replace torch fails the run. Without a GPU, every GPU part must say so and the run exit 0.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

SCRIPT = ROOT / "scripts" / "gpu_check.py"


def clean_env() -> dict:
    return {key: value for key, value in os.environ.items()
            if key not in {"PYTHONPATH", "VIRTUAL_ENV", "COURSE_DEVICE"}}


def fingerprint(folder: Path) -> str:
    """A hash of the names and sizes of every file of an installed torch."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(f"{path.relative_to(folder)}:{path.stat().st_size}".encode())
    return digest.hexdigest()


def requirement_closure(name: str) -> list[importlib.metadata.Distribution]:
    """The installed distribution `name` and every one its import needs (extras left out)."""
    found, todo = {}, [name]
    while todo:
        wanted = re.split(r"[ ;<>=!~\[(]", todo.pop(), maxsplit=1)[0]
        key = wanted.lower().replace("_", "-")
        if key in found:
            continue
        found[key] = importlib.metadata.distribution(wanted)
        todo += [req for req in found[key].requires or [] if "extra ==" not in req]
    return list(found.values())


def install_by_links(closure: list[importlib.metadata.Distribution], site: Path) -> None:
    """The machine's own torch: this interpreter's torch and its dependencies, each top-level
    file or folder linked into the machine's site-packages with its metadata. pip and the
    import system see it installed there, as on the GPU machines' image, without downloading
    and unpacking a second copy (about 100 s of the suite's time)."""
    for dist in closure:
        tops = {Path(str(file)).parts[0] for file in dist.files or []}
        for top in tops - {"..", "__pycache__"}:
            source = Path(dist.locate_file(top))
            if source.exists() and not (site / top).exists():
                (site / top).symlink_to(source)


@pytest.fixture(scope="module")
def machine(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("gpu-machine")
    venv = root / "machine"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(subprocess.run([python, "-c", purelib], check=True, capture_output=True,
                               text=True).stdout.strip())
    closure = requirement_closure("torch")
    # The venv's own setuptools is older than torch requires: as `pip install torch` would.
    subprocess.run([python, "-m", "pip", "uninstall", "--quiet", "--yes",
                    *[dist.metadata["Name"] for dist in closure]], check=True, env=clean_env())
    install_by_links(closure, site)
    where = "import torch, os; print(os.path.dirname(torch.__file__))"
    torch_dir = Path(subprocess.run([python, "-c", where], check=True, capture_output=True,
                                    text=True).stdout.strip())
    wheels = root / "wheels"
    python_version = f"{sys.version_info.major}.{sys.version_info.minor}"
    subprocess.run([sys.executable, str(SCRIPT), "wheels", "--dest", str(wheels),
                    "--python-version", python_version], check=True, capture_output=True,
                   env=clean_env())
    before = fingerprint(torch_dir)
    result = subprocess.run([python, str(SCRIPT), "check", "--wheels", str(wheels),
                             "--env", str(root / "env"), "--out", str(root / "runs")],
                            check=False, capture_output=True, text=True, env=clean_env(),
                            timeout=900)
    env_torch = subprocess.run([str(root / "env" / "bin" / "python"), "-c",
                                "import torch; print(torch.__file__)"], check=False,
                               capture_output=True,
                               text=True).stdout.strip()
    return {"result": result, "wheels": wheels, "torch_dir": torch_dir, "before": before,
            "after": fingerprint(torch_dir), "env_torch": env_torch, "runs": root / "runs"}


@pytest.mark.slow
def test_wheels_folder_holds_no_torch(machine):
    """Checks the prepared wheels leave PyTorch to the machine (no torch, no CUDA libraries)."""
    names = [path.name for path in machine["wheels"].glob("*.whl")]
    assert any(name.startswith("nbclient-") for name in names)
    assert not [name for name in names if name.startswith(("torch-", "nvidia_", "triton-"))]


@pytest.mark.slow
def test_check_reports_no_gpu_and_exits_0(machine):
    """Checks the whole run ends with 'no GPU' for every GPU part and exit status 0."""
    result = machine["result"]
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert summary.startswith("gpu-check passed"), summary
    assert "no GPU" in summary
    lessons = len([path for path in (ROOT / "solutions").iterdir()
                   if path.is_dir() and path.name[:2].isdigit()])
    assert f"notebooks on CUDA: {lessons} skipped, no GPU" in summary
    assert "skipped" in summary.split("pytest -m gpu:")[1] and "failed" not in summary
    assert "GPU figures: no GPU" in result.stdout
    assert not machine["runs"].exists(), "no reference run without a GPU"


@pytest.mark.slow
def test_check_uses_the_machines_torch_in_place(machine):
    """Checks the check's environment imports the machine's own torch, left unchanged."""
    assert machine["env_torch"].startswith(str(machine["torch_dir"])), machine["env_torch"]
    assert machine["after"] == machine["before"]


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gpu_check", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("stderr, flagged", [
    ("[W1125 02:00:00] ERROR gpuGetDeviceCount failed with code 35\n", True),
    ("/x.py:3: FutureWarning: `torch.cuda.amp.GradScaler(args...)` is deprecated\n", True),
    ("Traceback (most recent call last):\nAttributeError: Can't get attribute 'Squares'\n",
     False),  # lesson 04 shows a spawned worker's traceback on purpose
    ("100%|##########| 10/10 [00:00<00:00]\n", False),
])
def test_lessons_may_not_write_warnings_or_logged_errors_to_stderr(stderr, flagged):
    """Checks which stderr lines of an executed lesson fail gpu-check."""
    import nbformat

    cell = nbformat.v4.new_code_cell("pass")
    cell.outputs = [nbformat.v4.new_output("stream", name="stderr", text=stderr),
                    nbformat.v4.new_output("stream", name="stdout", text="ERROR in stdout\n")]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    assert bool(load_script().unmeant_stderr(notebook)) is flagged


def test_lessons_are_chosen_by_number_in_the_order_given():
    """Checks --lessons keeps the order asked for (08 first) and refuses an unknown lesson."""
    script = load_script()
    assert script.lesson_names(["08", "01_tensors_devices"]) == ["08_overhead",
                                                                "01_tensors_devices"]
    assert len(script.lesson_names(None)) == len(list(ROOT.glob("solutions/*/*.ipynb")))
    with pytest.raises(SystemExit, match="no lesson '42'"):
        script.lesson_names(["42"])


def test_a_fresh_lesson_is_skipped_and_what_the_deadline_leaves_is_named(tmp_path):
    """Checks a GPU run skips a lesson whose published run is fresh, starts none past the
    deadline, and names those left with the command that runs them."""
    import time

    import nbformat

    script = load_script()
    lesson = next((ROOT / "solutions" / "00_setup").glob("*.ipynb"))
    notebook = nbformat.read(lesson, as_version=4)
    notebook.cells.insert(0, nbformat.v4.new_markdown_cell("h", metadata={
        "reference_run": {"date": "2026-11-27 06:21 UTC", "seconds": 5}}))
    (tmp_path / "gpu").mkdir()
    nbformat.write(notebook, tmp_path / "gpu" / "00_setup.ipynb")  # fresh: today's code cells
    machine = script.Machine(cuda=True, reason="", gpu="GPU", driver="1", torch="2",
                             cuda_version="13", python="3.12")
    plan = script.Plan(["00_setup", "08_overhead", "01_tensors_devices"], tmp_path,
                       deadline=time.monotonic())
    passed, failed, summary = script.run_notebooks(Path(sys.executable), machine,
                                                   tmp_path / "out", plan)
    assert (passed, failed) == (0, 0) and not (tmp_path / "out").exists()
    assert summary == ("notebooks on CUDA: 0 passed, 0 failed, 1 already fresh; 2 left for lack "
                       "of time (08_overhead, 01_tensors_devices): make gpu-check "
                       "LESSONS=\"08 01\"")
    plan.again = ("00_setup",)  # AGAIN=00: run it though it is fresh
    assert "0 already fresh; 3 left" in script.run_notebooks(
        Path(sys.executable), machine, tmp_path / "out", plan)[2]


def test_a_lessons_time_comes_from_its_run(tmp_path):
    """Checks a lesson's expected time: recorded, else its cells' execution stamps + a start."""
    script = load_script()
    stamps = {"iopub.execute_input": "2026-11-27T06:20:00.5Z",
              "shell.execute_reply": "2026-11-27T06:20:10.5Z"}
    cells = [{"cell_type": "markdown", "metadata": {"reference_run": {"date": "d"}},
              "source": []}, {"cell_type": "code", "metadata": {"execution": stamps},
                              "source": []}]
    run = tmp_path / "run.ipynb"
    run.write_text(json.dumps({"cells": cells}))
    assert script.lesson_seconds(run) == 10 + script.KERNEL_START_S
    cells[0]["metadata"]["reference_run"]["seconds"] = 42
    run.write_text(json.dumps({"cells": cells}))
    assert script.lesson_seconds(run) == 42
    assert script.lesson_seconds(tmp_path / "none.ipynb") == script.DEFAULT_LESSON_S
