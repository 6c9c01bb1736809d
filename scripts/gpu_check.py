"""Verify the whole course on a CUDA machine in one step: `make gpu-check` (docs/gpu-check.md).

    python3 scripts/gpu_check.py wheels --dest wheels --python-version 3.12   # networked machine
    python3 scripts/gpu_check.py check --wheels wheels                        # the GPU machine
    python3 scripts/gpu_check.py check --lessons 08 01 --deadline-s 300      # some, in time
    python3 scripts/gpu_check.py mark-stale                                   # anywhere

`check` runs on a machine with no network, its own PyTorch and none of the course's other
dependencies. It makes an environment beside that PyTorch, never touching it: a venv whose
site-packages comes first and whose one `.pth` line appends the machine's site-packages, so the
machine's torch (and any package it already has in a version the course accepts) is used as it
is, and only what is missing is installed there from the wheels folder, with `--no-index`.
(`pip install --target` would not do: it implies `--ignore-installed`, so pip would try to
install a second torch.) Then, in one run: `pytest -m gpu`, every solutions/ notebook executed
on CUDA and written to docs/reference-runs/<gpu>/<lesson>.ipynb, and benchmarks/gpu_summary.py's
table. Without a GPU each GPU part says "no GPU" and the command exits 0.

Lesson by lesson: `--lessons` runs those lessons in that order, skipping each whose published
run already matches its code cells; `--deadline-s` starts no lesson that its last run's time
would carry past the deadline, and the run ends by naming the lessons left. A published run
whose lesson changed since stays published, marked stale (`mark-stale`: the changed cells and
the run's date in its header cell, and the index docs/reference-runs/README.md).

Only the standard library here: this file runs before anything is installed.
"""
from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime
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


def make_environment(env: Path, wheels: Path, machine_python: str, reuse: bool = False) -> Path:
    """A venv beside the machine's packages; the course and what is missing from `wheels`.

    ``reuse``: keep one an earlier call made (it leaves ``.ready`` when complete)."""
    if reuse and (env / ".ready").exists():
        return env / "bin" / "python"
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
    (env / ".ready").touch()
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
    return sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")
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


@dataclass
class Plan:
    """Which lessons a check runs, in which order, and by when."""

    lessons: list[str]  # solutions/ folder names, in the order given
    published: Path  # where the committed runs are: a lesson whose run there is fresh is skipped
    deadline: float | None = None  # time.monotonic() after which no lesson starts
    again: tuple[str, ...] | None = None  # lessons to run even if fresh; () for every one


def lesson_names(wanted: list[str] | None) -> list[str]:
    """solutions/ folders named (by their number or full name) in `wanted`'s order; all if None."""
    every = sorted(path.parent.name for path in ROOT.glob("solutions/*/*.ipynb"))
    if not wanted:
        return every
    chosen = []
    for name in wanted:
        found = [lesson for lesson in every if lesson == name or lesson.split("_")[0] == name]
        if not found:
            raise SystemExit(f"gpu_check: no lesson {name!r} in solutions/ ({', '.join(every)})")
        chosen += [lesson for lesson in found if lesson not in chosen]
    return chosen


def run_notebooks(python: Path, machine: Machine, out: Path, plan: Plan) -> tuple[int, int, str]:
    """The planned solutions/ notebooks on CUDA, each written to out/<gpu>/<lesson>.ipynb."""
    if not machine.cuda:
        return 0, 0, (f"notebooks on CUDA: {len(plan.lessons)} skipped, no GPU "
                      f"({machine.reason})")
    failed, passed, fresh, left = [], 0, [], []
    for lesson in plan.lessons:
        notebook = lesson_notebook(lesson)
        published = plan.published / machine.slug / f"{lesson}.ipynb"
        again = plan.again is not None and (not plan.again or lesson in plan.again)
        if not again and published.exists() and not staleness(published)["stale"]:
            fresh.append(lesson)
            print(f"  {lesson:<22} already fresh ({published})", flush=True)
            continue
        estimate = lesson_seconds(published)
        remaining = None if plan.deadline is None else plan.deadline - time.monotonic()
        if remaining is not None and (left or remaining < estimate):
            left.append(lesson)
            continue
        target = out / machine.slug / f"{lesson}.ipynb"
        started = time.monotonic()
        try:
            result = subprocess.run([str(python), __file__, "execute", str(notebook),
                                     str(target), "--header", header_text(machine)],
                                    check=False, cwd=notebook.parent, capture_output=True,
                                    text=True, timeout=remaining)
            code, stderr = result.returncode, result.stderr
        except subprocess.TimeoutExpired:
            code, stderr = 1, f"stopped at the deadline, after {remaining:.0f} s"
        status = "passed" if code == 0 else "FAILED"
        print(f"  {lesson:<22} {status} ({time.monotonic() - started:.0f} s)", flush=True)
        if code:
            failed.append(lesson)
            print(stderr[-3000:])
        else:
            passed += 1
    summary = (f"notebooks on CUDA: {passed} passed, {len(failed)} failed, "
               f"{len(fresh)} already fresh" + (f" ({', '.join(failed)} failed)" if failed else ""))
    if left:
        numbers = " ".join(lesson.split("_")[0] for lesson in left)
        summary += (f"; {len(left)} left for lack of time ({', '.join(left)}): "
                    f"make gpu-check LESSONS=\"{numbers}\"")
    return passed, len(failed), summary


def header_text(machine: Machine) -> str:
    return (f"**Reference run**, generated by `make gpu-check` (scripts/gpu_check.py); never "
            f"edit by hand, run it again.\n\n"
            f"* device: {machine.gpu} (cuda:0), NVIDIA driver {machine.driver}\n"
            f"* PyTorch {machine.torch}, CUDA {machine.cuda_version}, Python {machine.python}\n"
            f"* date: {time.strftime(DATE_FORMAT, time.gmtime())}\n")


def execute(source: Path, target: Path | None, header: str) -> None:
    """Run one notebook with nbclient in this environment's kernel; save it with its outputs."""
    import nbclient
    import nbformat

    started = time.monotonic()
    notebook = nbformat.read(source, as_version=4)
    client = nbclient.NotebookClient(notebook, kernel_name="python3",
                                     timeout=NOTEBOOK_TIMEOUT_S,
                                     resources={"metadata": {"path": str(source.parent)}})
    try:
        client.execute()
    finally:
        if target is not None:
            record = {"date": re.search(r"date: (.*)", header).group(1).strip(),
                      "seconds": round(time.monotonic() - started)}
            cell = nbformat.v4.new_markdown_cell(header, metadata={"reference_run": record})
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


# ------------------------------------------------------------------ published runs: fresh or stale

RUNS = ROOT / "docs" / "reference-runs"
DATE_FORMAT = "%Y-%m-%d %H:%M UTC"
DEFAULT_LESSON_S = 60  # a lesson's expected time on a GPU when no run of it recorded its own
KERNEL_START_S = 5  # starting a lesson's kernel, before its first cell
STALE_MARK = "**Stale.**"


def lesson_notebook(lesson: str) -> Path:
    found = sorted((ROOT / "solutions" / lesson).glob("*.ipynb"))
    if len(found) != 1:
        raise SystemExit(f"gpu_check: solutions/{lesson}/ holds {len(found)} notebooks, not 1")
    return found[0]


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def code_sources(notebook: dict) -> list[str]:
    return ["".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "code"]


def run_record(run: Path) -> dict:
    """What a run's header cell records: date, seconds, stale (the marking); {} if no run."""
    if not run.exists():
        return {}
    first = read_json(run)["cells"][0]
    record = first["metadata"].get("reference_run")
    if not record:
        return {}
    if record is True:  # runs written before the header recorded more than that it is one
        date = re.search(r"date: ([^\n]*)", "".join(first["source"]))
        record = {"date": date.group(1).strip() if date else "unknown"}
    return record


def lesson_seconds(run: Path) -> float:
    """How long a lesson took on this GPU: as its run recorded, or from its cells' execution
    times (nbclient records them) and a kernel's start; DEFAULT_LESSON_S without a run."""
    if not run.exists():
        return DEFAULT_LESSON_S
    if run_record(run).get("seconds"):
        return run_record(run)["seconds"]
    stamps = sorted(value for cell in read_json(run)["cells"]
                    for key, value in cell["metadata"].get("execution", {}).items()
                    if key in ("iopub.execute_input", "shell.execute_reply"))
    if not stamps:
        return DEFAULT_LESSON_S
    first, last = (datetime.fromisoformat(stamp.replace("Z", "+00:00"))
                   for stamp in (stamps[0], stamps[-1]))
    return (last - first).total_seconds() + KERNEL_START_S


def staleness(run: Path) -> dict:
    """How a published run differs from its lesson today: the lesson's code cells (numbered
    from 1, as the lesson has them now) that are new or changed since the run, and how many
    cells of the run are gone; ``stale`` is whether any are."""
    ran = code_sources(read_json(run))
    today = code_sources(read_json(lesson_notebook(run.stem)))
    changed, removed = [], 0
    matcher = difflib.SequenceMatcher(a=ran, b=today, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            changed += range(j1 + 1, j2 + 1)
        if tag in ("replace", "delete"):
            removed += max(0, (i2 - i1) - (j2 - j1))
    return {"stale": bool(changed or removed), "changed": changed, "removed": removed}


def stale_words(run: Path, stale: dict) -> str:
    cells = stale["changed"]
    what = [f"code cell{'s' if len(cells) > 1 else ''} {', '.join(map(str, cells))} changed"
            ] if cells else []
    if stale["removed"]:
        what.append(f"{stale['removed']} cell{'s' if stale['removed'] > 1 else ''} removed")
    return " and ".join(what)


def stale_paragraph(run: Path, stale: dict, date: str) -> str:
    source = lesson_notebook(run.stem).relative_to(ROOT)
    return (f"{STALE_MARK} `{source}` has changed since this run ({date}): "
            f"{stale_words(run, stale)}. The outputs below are those of the code as it ran; "
            f"`make gpu-check LESSONS={run.stem.split('_')[0]}` on a GPU refreshes it "
            f"(docs/gpu-check.md).\n")


def mark(run: Path) -> bool:
    """Write a run's staleness into its header cell; True when that changed the file."""
    notebook = read_json(run)
    first, record = notebook["cells"][0], dict(run_record(run))
    text = "".join(first["source"]).split(STALE_MARK)[0].rstrip("\n") + "\n"
    stale = staleness(run)
    record.pop("stale", None)
    if stale["stale"]:
        record["stale"] = {"changed": stale["changed"], "removed": stale["removed"]}
        text += "\n" + stale_paragraph(run, stale, record["date"])
    first["metadata"]["reference_run"] = record
    first["source"] = text.splitlines(keepends=True)
    written = json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    if written == run.read_text(encoding="utf-8"):
        return False
    run.write_text(written, encoding="utf-8")
    return True


def marking_problem(run: Path) -> str | None:
    """Why a published run's marking is not true (unmarked but stale, marked stale for cells
    that match, a header edited by hand), or None when it is."""
    name = f"{run.parent.name}/{run.name}"
    first = read_json(run)["cells"][0]
    if not first["metadata"].get("reference_run"):
        return f"{name}: its first cell is not the generated header; was it edited by hand?"
    if not (ROOT / "solutions" / run.stem).is_dir():
        return f"{name}: no lesson solutions/{run.stem}/ to compare it with"
    stale, marked = staleness(run), run_record(run).get("stale")
    truth = {"changed": stale["changed"], "removed": stale["removed"]} if stale["stale"] else None
    fix = "run `python scripts/gpu_check.py mark-stale` (docs/gpu-check.md)"
    if marked != truth:
        if not marked:
            return f"{name}: stale ({stale_words(run, stale)}) but not marked so; {fix}"
        if not truth:
            return f"{name}: marked stale, but its code cells match the lesson's; {fix}"
        return (f"{name}: marked stale for {marked}, but {stale_words(run, stale)}; {fix}")
    if (STALE_MARK in "".join(first["source"])) != bool(truth):
        return f"{name}: its header's text and its metadata disagree on staleness; {fix}"
    return None


def index_text(runs: Path = RUNS) -> str:
    """docs/reference-runs/README.md: each lesson's run on each GPU, fresh or stale."""
    devices = sorted(path.name for path in runs.iterdir() if path.is_dir()) if runs.is_dir() \
        else []
    lines = ["# Reference runs", "",
             ("Every lesson of `solutions/` executed on a GPU by `make gpu-check`, outputs "
              "included (docs/gpu-check.md). A run whose lesson has changed since stays "
              "published, marked **stale** here and in its first cell with the cells that "
              "changed, until a GPU runs the lesson again (`make gpu-check LESSONS=\"08 01\"` "
              "runs some). Generated by `python scripts/gpu_check.py mark-stale`; never edit "
              "by hand."), "",
             "| lesson | " + " | ".join(devices) + " |",
             "|---" * (len(devices) + 1) + "|"]
    for lesson in lesson_names(None):
        cells = []
        for device in devices:
            run = runs / device / f"{lesson}.ipynb"
            if not run.exists():
                cells.append("no run")
                continue
            record, stale, link = run_record(run), staleness(run), f"({device}/{lesson}.ipynb)"
            cells.append(f"[**stale**]{link}: {stale_words(run, stale)} since the run of "
                         f"{record['date']}" if stale["stale"]
                         else f"[fresh]{link}, ran {record['date']}")
        lines.append(f"| {lesson} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def mark_stale(runs: Path = RUNS) -> int:
    """Mark every published run stale or fresh, and write the index; print what is stale."""
    marked = [run for run in sorted(runs.glob("*/*.ipynb")) if mark(run)]
    index = runs / "README.md"
    if runs.is_dir() and (not index.exists() or index.read_text(encoding="utf-8")
                          != index_text(runs)):
        index.write_text(index_text(runs), encoding="utf-8")
    stale = [f"{run.parent.name}/{run.stem} ({stale_words(run, staleness(run))})"
             for run in sorted(runs.glob("*/*.ipynb")) if staleness(run)["stale"]]
    print(f"mark-stale: {len(marked)} run(s) re-marked; stale: {'; '.join(stale) or 'none'}")
    return 0


def run_benchmarks(python: Path) -> bool:
    result = subprocess.run([str(python), str(ROOT / "benchmarks" / "gpu_summary.py")],
                            check=False, cwd=ROOT)
    return result.returncode == 0


def check(wheels: Path, env: Path, out: Path, machine_python: str, plan: Plan,
          skip: tuple[str, ...] = (), reuse: bool = False) -> int:
    started = time.monotonic()
    python = make_environment(env, wheels, machine_python, reuse)
    machine = describe_machine(python)
    print(f"machine: {machine.gpu}, driver {machine.driver}, PyTorch {machine.torch} "
          f"(CUDA {machine.cuda_version}), Python {machine.python}", flush=True)
    tests_ok, tests = (True, "not run") if "tests" in skip else run_gpu_tests(python)
    print(f"pytest -m gpu: {tests}", flush=True)
    failed, notebooks = 0, "notebooks not run"
    if "notebooks" not in skip:
        _, failed, notebooks = run_notebooks(python, machine, out, plan)
        if machine.cuda and out.resolve() == RUNS.resolve():
            mark_stale(out)
    print(notebooks, flush=True)
    benchmarks_ok = True if "benchmarks" in skip else run_benchmarks(python)
    ok = tests_ok and not failed and benchmarks_ok
    verdict = "passed" if ok else "FAILED"
    gpu = machine.gpu if machine.cuda else f"no GPU: {machine.reason}"
    benchmarks = "not run" if "benchmarks" in skip else "ran" if benchmarks_ok else "FAILED"
    print(f"gpu-check {verdict} in {time.monotonic() - started:.0f} s ({gpu}); "
          f"pytest -m gpu: {tests}; {notebooks}; benchmarks {benchmarks}")
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
    run.add_argument("--lessons", nargs="*", default=None, metavar="LESSON",
                     help="lessons to run, in this order: numbers (08) or names (default: all)")
    run.add_argument("--again", nargs="*", default=None, metavar="LESSON",
                     help="run these lessons (none named: every one) even if their published run "
                          "is fresh, e.g. after a change in the package they call")
    run.add_argument("--published", type=Path, default=RUNS,
                     help="the published runs a fresh lesson is looked up in")
    run.add_argument("--deadline-s", type=float, default=None,
                     help="start no lesson that would run past this many seconds from now")
    run.add_argument("--skip", action="append", default=[],
                     choices=("tests", "notebooks", "benchmarks"), help="leave out a step")
    run.add_argument("--reuse-env", action="store_true",
                     help="keep the environment an earlier call made complete")
    env = commands.add_parser("env", help="only make the environment; print its python")
    env.add_argument("--wheels", type=Path, default=ROOT / "wheels")
    env.add_argument("--env", type=Path, default=ROOT / ".gpu-check-env")
    env.add_argument("--machine-python", default=sys.executable)
    env.add_argument("--reuse", action="store_true", help="keep one made complete before")
    commands.add_parser("mark-stale", help="mark published runs whose lesson changed since")
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
    if args.command == "mark-stale":
        return mark_stale()
    if args.command == "env":
        print(make_environment(args.env.resolve(), args.wheels.resolve(), args.machine_python,
                               args.reuse))
        return 0
    deadline = None if args.deadline_s is None else time.monotonic() + args.deadline_s
    again = None if args.again is None else tuple(lesson_names(args.again) if args.again
                                                  else ())
    plan = Plan(lesson_names(args.lessons), args.published.resolve(), deadline, again)
    return check(args.wheels.resolve(), args.env.resolve(), args.out.resolve(),
                 args.machine_python, plan, tuple(args.skip), args.reuse_env)


if __name__ == "__main__":
    sys.exit(main())
