"""A trial of a learner's DDP script: one rank of a simulated GPU node, then torchrun on 2 CPU
ranks (what lesson 07's check runs), in the learner's kernel or, when grading, in a sandbox.

* :func:`run_trial` -- the trial itself, wherever it runs: in the kernel (the learner pressing
  the check) or as ``python -m course_utils.checks.distributed.trial FOLDER CAP_MB`` in a
  sandbox, the script's text and the inputs on its standard input.
* :func:`trial_outside` -- the grader's side: the script's text and inputs drawn at grading
  time go to the trial through the grader's sandbox (never in the grader's process, never in
  the learner's kernel), whose scratch is a capped tmpfs (its files gone with it: the trial
  prints what it observed and the checkpoint's bytes, base64, as its last line); what comes
  back is split into claims (the ranks' reports, the simulated rank: written by processes
  that run the script) and evidence the grader reads itself (rank 0's checkpoint,
  evidence.py).
"""
from __future__ import annotations

import base64
import json
import os
import sys
import tempfile
from contextlib import AbstractContextManager
from dataclasses import asdict
from pathlib import Path
from typing import Protocol

from .evidence import MAX_CHECKPOINT_BYTES, CheckpointFacts, read_checkpoint
from .simulate import simulate_rank

SCRIPT = "ddp_train.py"
RUN = "run"  # the torchrun run's folder: config, reports, checkpoint
RESULT = "course-trial-result: "  # the trial's last line of output
CHECKPOINT = "checkpoint.pt"  # where the grader puts the bytes it was sent, to read them
MAX_SCRIPT_CHARS = 64_000
MAX_OBSERVED_BYTES = 4 * 2**20
# What comes back on the trial's output: the observations and the checkpoint, in base64.
MAX_RESULT_BYTES = len(RESULT) + MAX_OBSERVED_BYTES + 2 * MAX_CHECKPOINT_BYTES + 4096


class Ran(Protocol):
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    refused: str


class Sandbox(Protocol):
    """What the grader lends a check to run learner code (grading.sandbox.run's limits)."""

    scratch_mb: int  # a run's scratch is a tmpfs of this size (0: the folder, uncapped)

    def folder(self) -> AbstractContextManager[Path]: ...

    def run(self, command: list[str], *, scratch: Path, timeout: float, stdin: bytes = b"",
            output_bytes: int = 0) -> Ran: ...

    def mark_scratch_filled(self) -> None: ...


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
        return _no_result(f"the script is longer than {MAX_SCRIPT_CHARS:,} characters")
    with sandbox.folder() as folder:
        # The trial's own limits (torchrun's time limit and stall rule, grown with the load)
        # end it first; this one only stops a trial that never gets that far.
        limit = 2 * inputs["timeout_s"] * inputs["max_slowdown"] + 60
        given = json.dumps({"script": text, "inputs": inputs}).encode()
        ran = sandbox.run([sys.executable, "-m", __name__, str(folder), str(sandbox.scratch_mb)],
                          scratch=folder, timeout=limit, stdin=given,
                          output_bytes=MAX_RESULT_BYTES)
        result = _result(ran.stdout)
        if result.get("scratch_full") is True:  # its word, which can only cost it points
            sandbox.mark_scratch_filled()
        observed = result.get("observed")
        if not isinstance(observed, dict) or not isinstance(observed.get("simulated"), dict):
            full = f"it filled its {sandbox.scratch_mb} MiB of scratch space"
            why = (full if result.get("scratch_full") is True else ran.refused) or (
                "it ran past its time limit" if ran.timed_out else
                _last_line(ran.stderr) or f"exit code {ran.returncode}")
            return _no_result(f"the trial of your script ended without a result ({why})")
        observed["checkpoint"] = None  # never the trial's word
        if isinstance(observed.get("launch"), dict):
            observed["checkpoint"] = _read_sent_checkpoint(result).to_dict()
        return observed


def _no_result(why: str) -> dict:
    return {"script": None, "simulated": None, "launch": None, "trial_error": why}


def _result(stdout: str) -> dict:
    """The trial's last result line, parsed (empty when there is none, or it is not JSON)."""
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT)]
    try:
        result = json.loads(lines[-1][len(RESULT):]) if lines else {}
    except (ValueError, RecursionError):
        return {}
    return result if isinstance(result, dict) else {}


def _read_sent_checkpoint(result: dict):
    """The checkpoint's bytes as the trial sent them, read as any checkpoint (evidence.py), from
    a folder of the grader's own (the sandbox's scratch was a tmpfs, gone with it)."""
    if result.get("checkpoint_link") is True:
        return CheckpointFacts("unreadable", problem="a link")
    encoded = result.get("checkpoint")
    with tempfile.TemporaryDirectory(prefix="course-checkpoint-") as folder:
        path = Path(folder) / CHECKPOINT
        if isinstance(encoded, str) and len(encoded) <= 2 * MAX_CHECKPOINT_BYTES + 8:
            try:
                path.write_bytes(base64.b64decode(encoded, validate=True))
            except ValueError:
                path.write_bytes(b"")  # not base64: unreadable
        return read_checkpoint(path)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def main(argv: list[str]) -> int:
    """``python -m course_utils.checks.distributed.trial FOLDER CAP_MB``: the trial, inside a
    sandbox, the script and the inputs on stdin; its result as the last line it prints."""
    folder, cap_mb = Path(argv[0]), int(argv[1])
    given = json.loads(sys.stdin.read())
    (folder / SCRIPT).write_text(given["script"])
    inputs = given["inputs"]
    try:
        observed = run_trial(folder / SCRIPT, inputs, folder=folder / RUN)
    except OSError:
        if not _full(folder, cap_mb):
            raise
        print(RESULT + json.dumps({"observed": None, "scratch_full": True}), flush=True)
        return 1
    checkpoint = folder / RUN / Path(inputs["config"]["checkpoint"]).name
    linked = checkpoint.is_symlink() or (folder / RUN).is_symlink()
    sent = None
    if checkpoint.is_file() and not linked:  # one byte past the cap says it is too large
        with checkpoint.open("rb") as file:
            sent = base64.b64encode(file.read(MAX_CHECKPOINT_BYTES + 1)).decode()
    result = {"observed": observed, "checkpoint": sent, "checkpoint_link": linked,
              "scratch_full": _full(folder, cap_mb)}
    print(RESULT + json.dumps(result), flush=True)
    return 0


def _full(folder: Path, cap_mb: int) -> bool:
    """Whether the scratch tmpfs (``cap_mb``) has less than 1 MiB left."""
    if cap_mb <= 0:
        return False
    info = os.statvfs(folder)
    return info.f_blocks * info.f_frsize <= (cap_mb + 1) * 2**20 \
        and info.f_bavail * info.f_frsize < 2**20


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
