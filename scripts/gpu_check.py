"""Verify the whole course on a CUDA machine in one step: `make gpu-check` (docs/gpu-check.md).

    python3 scripts/gpu_check.py wheels --dest wheels --python-version 3.12   # networked machine
    python3 scripts/gpu_check.py check --wheels wheels                        # the GPU machine

`check` runs on a machine with no network, its own PyTorch and none of the course's other
dependencies. It makes an environment beside that PyTorch, never touching it: a venv whose
site-packages comes first and whose one `.pth` line appends the machine's site-packages, so the
machine's torch (and any package it already has in a version the course accepts) is used as it
is, and only what is missing is installed there from the wheels folder, with `--no-index`.
(`pip install --target` would not do: it implies `--ignore-installed`, so pip would try to
install a second torch.) Then, in one run: `pytest -m gpu`, every solutions/ notebook executed
on CUDA and written to docs/reference-runs/<gpu>/<lesson>.ipynb, and benchmarks/gpu_summary.py's
table. Without a GPU each GPU part says "no GPU" and the command exits 0.

Only the standard library here: this file runs before anything is installed.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
# What executing the notebooks and the GPU tests needs besides the course's own runtime
# dependencies; no JupyterLab, no grader.
EXECUTION = ("ipykernel", "nbclient", "nbformat", "nbval", "pytest", "pytest-timeout")
RUNTIME = ("numpy", "scikit-learn", "matplotlib", "tqdm")
BUILD = ("setuptools>=68",)  # the course installs in editable mode, without build isolation
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(17, 40)] + [
    "manylinux2014_x86_64", "manylinux1_x86_64"]
NOTEBOOK_TIMEOUT_S = 120  # per cell, as the test suite's nbval runs


def requirements() -> list[str]:
    """pyproject's own requirement strings (ranges) for the packages the check installs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["dependencies"] + project["optional-dependencies"]["test"]
    by_name = {re.split(r"[<>=!~ \[;]", spec, maxsplit=1)[0].lower(): spec for spec in declared}
    missing = [name for name in RUNTIME + EXECUTION if name not in by_name]
    if missing:
        raise SystemExit(f"gpu_check: pyproject.toml no longer declares {missing}")
    return [by_name[name] for name in RUNTIME + EXECUTION] + list(BUILD)


def download_wheels(dest: Path, python_version: str) -> None:
    """pip download, for the GPU machine's Python and platform, what `check` installs."""
    platforms = [flag for platform in PLATFORMS for flag in ("--platform", platform)]
    command = [sys.executable, "-m", "pip", "download", "--only-binary=:all:",
               "--python-version", python_version, "--implementation", "cp", *platforms,
               "--constraint", str(ROOT / "requirements.lock"), "--dest", str(dest),
               *requirements()]
    print(f"gpu-wheels: {len(requirements())} requirements for CPython {python_version} "
          f"into {dest}", flush=True)
    subprocess.run(command, check=True)


# ------------------------------------------------------------------ the environment

def machine_site_dirs(python: str) -> list[str]:
    code = ("import json, site, sysconfig; print(json.dumps(list(dict.fromkeys("
            "site.getsitepackages() + [sysconfig.get_path('purelib'), "
            "sysconfig.get_path('platlib')]))))")
    return json.loads(subprocess.run([python, "-c", code], check=True, capture_output=True,
                                     text=True).stdout)


def make_environment(env: Path, wheels: Path, machine_python: str) -> Path:
    """A venv beside the machine's packages; the course and what is missing from `wheels`."""
    if not wheels.is_dir() or not any(wheels.glob("*.whl")):
        raise SystemExit(f"gpu_check: no wheels in {wheels}; prepare them on a networked "
                         f"machine with `make gpu-wheels` (docs/gpu-check.md)")
    subprocess.run([machine_python, "-m", "venv", "--without-pip", "--clear", str(env)],
                   check=True)
    python = env / "bin" / "python"
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = Path(subprocess.run([str(python), "-c", where], check=True, capture_output=True,
                               text=True).stdout.strip())
    # addsitedir appends, after the venv's own site-packages, and reads the .pth files there.
    lines = [f"import site; site.addsitedir({folder!r})"
             for folder in machine_site_dirs(machine_python)]
    (site / "machine-packages.pth").write_text("\n".join(lines) + "\n")
    pip = [machine_python, "-m", "pip", "--python", str(python), "install", "--quiet",
           "--no-index", "--find-links", str(wheels)]
    subprocess.run([*pip, *requirements()], check=True)
    subprocess.run([*pip, "--no-deps", "--no-build-isolation", "--editable", str(ROOT)],
                   check=True)
    return python


# ------------------------------------------------------------------ the steps

@dataclass
class Machine:
    cuda: bool
    reason: str
    gpu: str
    driver: str
    torch: str
    cuda_version: str
    python: str

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.gpu.lower()).strip("-")


MACHINE_PROBE = """
import json, platform, torch
cuda = torch.cuda.is_available()
reason = "" if cuda else ("this PyTorch is a CPU-only build" if torch.version.cuda is None
                          else "torch.cuda.is_available() is False: no NVIDIA GPU or driver")
print(json.dumps(dict(cuda=cuda, reason=reason,
                      gpu=torch.cuda.get_device_name(0) if cuda else "no GPU",
                      torch=torch.__version__, cuda_version=torch.version.cuda or "none",
                      python=platform.python_version())))
"""


def describe_machine(python: Path) -> Machine:
    facts = json.loads(subprocess.run([str(python), "-c", MACHINE_PROBE], check=True,
                                      capture_output=True, text=True).stdout)
    driver = "none"
    if facts["cuda"]:
        query = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                                "--format=csv,noheader"], check=False, capture_output=True,
                               text=True)
        driver = query.stdout.splitlines()[0].strip() if query.returncode == 0 else "unknown"
    return Machine(driver=driver, **facts)


def gpu_test_files() -> list[str]:
    # Only the files that mark GPU tests: collecting the others would import the grader's
    # dependencies, which this check does not install.
    return sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").glob("test_*.py")
                  if "pytest.mark.gpu" in path.read_text())


def run_gpu_tests(python: Path) -> tuple[bool, str]:
    result = subprocess.run([str(python), "-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider",
                             "-q", *gpu_test_files()], check=False, cwd=ROOT,
                            capture_output=True, text=True)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    summary = lines[-1].strip("= ") if lines else result.stderr.strip()[-300:]
    if result.returncode not in (0, 5):
        print(result.stdout[-4000:] + result.stderr[-2000:])
    return result.returncode in (0, 5), summary


def run_notebooks(python: Path, machine: Machine, out: Path) -> tuple[int, int, str]:
    """Every solutions/ notebook on CUDA, written to out/<gpu>/<lesson>.ipynb."""
    notebooks = sorted(ROOT.glob("solutions/*/*.ipynb"))
    if not machine.cuda:
        return 0, 0, f"notebooks on CUDA: {len(notebooks)} skipped, no GPU ({machine.reason})"
    header = header_text(machine)
    failed = []
    for notebook in notebooks:
        target = out / machine.slug / f"{notebook.parent.name}.ipynb"
        started = time.monotonic()
        result = subprocess.run([str(python), __file__, "execute", str(notebook), str(target),
                                 "--header", header], check=False, cwd=notebook.parent,
                                capture_output=True, text=True)
        status = "passed" if result.returncode == 0 else "FAILED"
        print(f"  {notebook.parent.name:<22} {status} ({time.monotonic() - started:.0f} s)",
              flush=True)
        if result.returncode:
            failed.append(notebook.parent.name)
            print(result.stderr[-3000:])
    passed = len(notebooks) - len(failed)
    return passed, len(failed), (f"notebooks on CUDA: {passed} passed, {len(failed)} failed, "
                                 f"0 skipped" + (f" ({', '.join(failed)})" if failed else ""))


def header_text(machine: Machine) -> str:
    return (f"**Reference run**, generated by `make gpu-check` (scripts/gpu_check.py); never "
            f"edit by hand, run it again.\n\n"
            f"* device: {machine.gpu} (cuda:0), NVIDIA driver {machine.driver}\n"
            f"* PyTorch {machine.torch}, CUDA {machine.cuda_version}, Python {machine.python}\n"
            f"* date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n")


def execute(source: Path, target: Path | None, header: str) -> None:
    """Run one notebook with nbclient in this environment's kernel; save it with its outputs."""
    import nbclient
    import nbformat

    notebook = nbformat.read(source, as_version=4)
    client = nbclient.NotebookClient(notebook, kernel_name="python3",
                                     timeout=NOTEBOOK_TIMEOUT_S,
                                     resources={"metadata": {"path": str(source.parent)}})
    try:
        client.execute()
    finally:
        if target is not None:
            cell = nbformat.v4.new_markdown_cell(header, metadata={"reference_run": True})
            notebook.cells.insert(0, cell)
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(notebook, target)
    noise = unmeant_stderr(notebook)
    if noise:
        raise SystemExit(f"{source.name}: a cell wrote a warning or error to stderr:\n{noise}")


def unmeant_stderr(notebook) -> str:
    """stderr lines that are warnings or logged errors ('ERROR ... gpuGetDeviceCount failed').

    A traceback on stderr can be the lesson's point (lesson 04's spawned worker), so only
    'SomethingWarning: ' and an upper-case ERROR count.
    """
    lines = [line for cell in notebook.cells if cell.cell_type == "code"
             for output in cell.get("outputs", [])
             if output.get("output_type") == "stream" and output.get("name") == "stderr"
             for line in output.get("text", "").splitlines()
             if re.search(r"\w*Warning: |\bERROR\b", line)]
    return "\n".join(lines[:20])


def run_benchmarks(python: Path) -> bool:
    result = subprocess.run([str(python), str(ROOT / "benchmarks" / "gpu_summary.py")],
                            check=False, cwd=ROOT)
    return result.returncode == 0


def check(wheels: Path, env: Path, out: Path, machine_python: str) -> int:
    started = time.monotonic()
    python = make_environment(env, wheels, machine_python)
    machine = describe_machine(python)
    print(f"machine: {machine.gpu}, driver {machine.driver}, PyTorch {machine.torch} "
          f"(CUDA {machine.cuda_version}), Python {machine.python}", flush=True)
    tests_ok, tests = run_gpu_tests(python)
    print(f"pytest -m gpu: {tests}", flush=True)
    _, failed, notebooks = run_notebooks(python, machine, out)
    print(notebooks, flush=True)
    benchmarks_ok = run_benchmarks(python)
    ok = tests_ok and not failed and benchmarks_ok
    verdict = "passed" if ok else "FAILED"
    gpu = machine.gpu if machine.cuda else f"no GPU: {machine.reason}"
    print(f"gpu-check {verdict} in {time.monotonic() - started:.0f} s ({gpu}); "
          f"pytest -m gpu: {tests}; {notebooks}; benchmarks "
          f"{'ran' if benchmarks_ok else 'FAILED'}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    wheels = commands.add_parser("wheels", help="download the wheels (networked machine)")
    wheels.add_argument("--dest", type=Path, default=ROOT / "wheels")
    wheels.add_argument("--python-version", default="3.12",
                        help="the GPU machine's Python (default 3.12, the H100 machines')")
    run = commands.add_parser("check", help="verify the course (GPU machine, no network)")
    run.add_argument("--wheels", type=Path, default=ROOT / "wheels")
    run.add_argument("--env", type=Path, default=ROOT / ".gpu-check-env")
    run.add_argument("--out", type=Path, default=ROOT / "docs" / "reference-runs")
    run.add_argument("--machine-python", default=sys.executable,
                     help="the Python that holds the machine's PyTorch (default: this one)")
    one = commands.add_parser("execute", help=argparse.SUPPRESS)
    one.add_argument("source", type=Path)
    one.add_argument("target", type=Path)
    one.add_argument("--header", required=True)
    args = parser.parse_args(argv)
    if args.command == "wheels":
        download_wheels(args.dest.resolve(), args.python_version)
        return 0
    if args.command == "execute":
        execute(args.source, None if str(args.target) == "-" else args.target, args.header)
        return 0
    return check(args.wheels.resolve(), args.env.resolve(), args.out.resolve(),
                 args.machine_python)


if __name__ == "__main__":
    sys.exit(main())
