"""A trial of a learner's DDP script: one rank of a simulated GPU node, then torchrun on 2 CPU
ranks (what lesson 07's check runs), in the learner's kernel or, when grading, in a sandbox.

* :func:`run_trial` -- the trial itself, wherever it runs: in the kernel (the learner pressing
  the check) or as ``python -m course_utils.checks.distributed.trial FOLDER`` in a sandbox.
* :func:`trial_outside` -- the grader's side: the script's text goes into a fresh folder with
  inputs drawn at grading time, the trial runs there through the grader's sandbox (never in
  the grader's process, never in the learner's kernel), and what comes back is split into
  claims (the ranks' reports, the simulated rank: written by processes that run the script)
  and evidence the grader reads itself (rank 0's checkpoint, evidence.py).
"""
from __future__ import annotations

import json
import os
import sys
from contextlib import AbstractContextManager
from dataclasses import asdict
from pathlib import Path
from typing import Protocol

from .evidence import CheckpointFacts, read_checkpoint
from .simulate import simulate_rank

SCRIPT = "ddp_train.py"
INPUTS = "inputs.json"
OBSERVED = "trial.json"
RUN = "run"  # the torchrun run's folder: config, reports, checkpoint
MAX_SCRIPT_CHARS = 64_000
MAX_OBSERVED_BYTES = 4 * 2**20


class Ran(Protocol):
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    refused: str


class Sandbox(Protocol):
    """What the grader lends a check to run learner code (grading.sandbox.run's limits)."""

    def folder(self) -> AbstractContextManager[Path]: ...

    def run(self, command: list[str], *, scratch: Path, timeout: float) -> Ran: ...


def run_trial(script: str | Path, inputs: dict, folder: str | Path | None = None) -> dict:
    """Simulate the script as one rank of ``inputs["machine"]``, then (unless it is still the
    exercise's stub) launch it on 2 CPU ranks and read rank 0's checkpoint; ``folder`` keeps
    the run's files."""
    from course_utils.lab.distributed import RunConfig, remove

    from . import patient  # looked up at call time: tests memoise launch_patiently

    config = RunConfig(**inputs["config"])
    simulated = simulate_rank(script, inputs["machine"], config=config, **inputs["node"])
    # The same rank on a machine without a GPU (PyTorch's CUDA build): gloo and the CPU.
    cpu_node = asdict(simulate_rank(script, inputs["cpu_machine"], config=config,
                                    **inputs["node"]))
    error = simulated.error
    if error and error["type"] == "NotImplementedError" and error["raised_in"] is None:
        return {"script": None, "simulated": asdict(simulated), "cpu_node": cpu_node,
                "launch": None, "checkpoint": None}  # the stub
    run = patient.launch_patiently(script, 2, config=config, timeout=inputs["timeout_s"],
                                   stall=inputs["stall_s"], max_slowdown=inputs["max_slowdown"],
                                   hide_gpus=True, folder=folder)
    checkpoint = read_checkpoint(Path(run.folder) / Path(config.checkpoint).name)
    if folder is None:
        remove(run)
    return {"script": None, "simulated": asdict(simulated), "cpu_node": cpu_node,
            "launch": run.to_dict(), "checkpoint": checkpoint.to_dict()}


def script_text(script, limit: int = MAX_SCRIPT_CHARS) -> str | None:
    """The text of the script file at ``script`` (None when it is not a readable file)."""
    if not isinstance(script, (str, os.PathLike)) or not os.path.isfile(script):
        return None
    with open(script, encoding="utf-8", errors="replace") as file:
        return file.read(limit + 1)


def trial_outside(text: str, inputs: dict, sandbox: Sandbox) -> dict:
    """Run the trial on ``text`` in ``sandbox``; the observations a check verifies, with the
    checkpoint read here (``"checkpoint"``) and never taken from the trial's word."""
    if len(text) > MAX_SCRIPT_CHARS:
        return {"script": None, "simulated": None, "launch": None,
                "trial_error": f"the script is longer than {MAX_SCRIPT_CHARS:,} characters"}
    with sandbox.folder() as folder:
        (folder / SCRIPT).write_text(text)
        (folder / INPUTS).write_text(json.dumps(inputs))
        # The trial's own limits (torchrun's time limit and stall rule, grown with the load)
        # end it first; this one only stops a trial that never gets that far.
        limit = 2 * inputs["timeout_s"] * inputs["max_slowdown"] + 60
        ran = sandbox.run([sys.executable, "-m", __name__, str(folder)], scratch=folder,
                          timeout=limit)
        observed = _read_observed(folder / OBSERVED)
        if observed is None or not isinstance(observed.get("simulated"), dict):
            why = ran.refused or ("it ran past its time limit" if ran.timed_out else
                                  _last_line(ran.stderr) or f"exit code {ran.returncode}")
            return {"script": None, "simulated": None, "launch": None,
                    "trial_error": f"the trial of your script ended without a result ({why})"}
        observed["checkpoint"] = None  # never the trial's word
        if isinstance(observed.get("launch"), dict):
            # Read here, after the sandbox is gone; a folder swapped for a link is not followed.
            name = Path(inputs["config"]["checkpoint"]).name
            facts = CheckpointFacts("unreadable", problem="a link") if (
                folder / RUN).is_symlink() else read_checkpoint(folder / RUN / name)
            observed["checkpoint"] = facts.to_dict()
        return observed


def _read_observed(path: Path) -> dict | None:
    try:
        handle = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) |
                         getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    with os.fdopen(handle, "rb") as file:
        data = file.read(MAX_OBSERVED_BYTES + 1)
    if len(data) > MAX_OBSERVED_BYTES:
        return None
    try:
        observed = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return observed if isinstance(observed, dict) else None


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def main(argv: list[str]) -> int:
    """``python -m course_utils.checks.distributed.trial FOLDER``: the trial, inside a sandbox."""
    folder = Path(argv[0])
    inputs = json.loads((folder / INPUTS).read_text())
    observed = run_trial(folder / SCRIPT, inputs, folder=folder / RUN)
    (folder / OBSERVED).write_text(json.dumps(observed))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
