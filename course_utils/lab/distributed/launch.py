"""Run a script on several processes with torchrun, time-limited; collect what each rank did."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

from ..args import positive_int, positive_number
from .config import RunConfig
from .records import CONFIG_ENV, DEADLINE_ENV, OUTPUT_TAIL, REPORTS_ENV, Launch, RankReport

# Each rank runs under the rank runner (rank.py, through this package's __main__.py).
RANK_RUNNER = "course_utils.lab.distributed"


def torchrun_command(script: str | Path, nproc: int) -> list[str]:
    """``torchrun --standalone --nproc_per_node=N -m course_utils.lab.distributed SCRIPT``.

    ``--standalone`` starts the rendezvous store on port 0, so the operating system hands it
    a free port when it binds: two runs at once (two graders, two notebooks) never clash, and
    no port is picked ahead and released, which another process could take in between.
    """
    torchrun = Path(sys.executable).with_name("torchrun")
    launcher = [str(torchrun)] if torchrun.exists() else [sys.executable, "-m",
                                                           "torch.distributed.run"]
    return [*launcher, "--standalone", f"--nproc_per_node={nproc}", "-m", RANK_RUNNER, str(script)]


def launch(script: str | Path, nproc: int = 2, *, config: RunConfig | None = None,
           timeout: float = 60.0, stall: float | None = None,
           hide_gpus: bool = False, folder: str | Path | None = None) -> Launch:
    """Run ``script`` on ``nproc`` processes with torchrun and return what each rank did.

    The script gets ``config`` (default ``RunConfig.example()``) through
    ``RunConfig.from_environment()``, its checkpoint path moved into a fresh folder. After
    ``timeout`` seconds every process of the run is killed and ``timed_out`` is set. With
    ``stall``, the run is also ended (``stalled``) once every rank still running has wrapped
    its model in DDP and none has noted anything for ``stall`` seconds: they are waiting for
    each other. ``hide_gpus`` sets ``CUDA_VISIBLE_DEVICES=""`` for the ranks. ``folder`` (an
    empty folder, made if missing) holds the run's files instead of a fresh temporary one.
    """
    path = Path(script)
    if not path.is_file():
        raise ValueError(f"launch(): no script file at {str(script)!r}; write it first "
                         "(e.g. with %%writefile) and pass its path.")
    positive_int(nproc, "nproc", "launch")
    timeout = positive_number(timeout, "timeout", "launch")
    stall = None if stall is None else positive_number(stall, "stall", "launch")
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="course-ddp-"))
    else:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
    config = config or RunConfig.example()
    config = replace(config, checkpoint=str(folder / Path(config.checkpoint).name))
    (folder / "config.json").write_text(config.to_json())
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{
        CONFIG_ENV: str(folder / "config.json"), REPORTS_ENV: str(folder),
        DEADLINE_ENV: str(time.time() + timeout)})
    if hide_gpus:
        env["CUDA_VISIBLE_DEVICES"] = ""
    command = torchrun_command(path, nproc)
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, errors="replace",
                               start_new_session=True)  # its own group: killed as one
    output: list[str] = []
    stream = process.stdout
    assert stream is not None  # stdout=PIPE
    reader = threading.Thread(target=lambda: output.extend(stream), daemon=True)
    reader.start()  # a full pipe would block torchrun: keep draining it
    ending = _wait(process, folder, nproc, started + timeout, stall)
    if ending:
        _kill_run(process, folder)
    process.wait()
    reader.join(timeout=10)
    stream.close()
    seconds = time.monotonic() - started
    reports = [RankReport.from_dict(json.loads(file.read_text()))
               for file in sorted(folder.glob("rank*.json"), key=_rank_of)]
    reported = {report.rank for report in reports}
    begun = sorted(_rank_of(file) for file in folder.glob("rank*.pid"))
    progress = [{"rank": rank, "events": _journal(folder / f"rank{rank}.events")}
                for rank in begun if rank not in reported]
    return Launch(command, process.returncode, ending == "timed out", seconds,
                  "".join(output)[-OUTPUT_TAIL:], reports, str(folder), begun, progress,
                  stalled=ending == "stalled")


def _wait(process: subprocess.Popen, folder: Path, nproc: int, deadline: float,
          stall: float | None) -> str | None:
    """Wait for torchrun to end: None when it did, else 'timed out' or 'stalled'."""
    while process.poll() is None:
        if time.monotonic() > deadline:
            return "timed out"
        if stall is not None and _stalled(folder, nproc, stall):
            return "stalled"
        time.sleep(0.2)
    return None


def _stalled(folder: Path, nproc: int, seconds: float) -> bool:
    """Every unfinished rank is past its DDP wrap and quiet for ``seconds``: a deadlock.

    Before the wrap a rank may be busy importing for many seconds without a note; after it,
    training notes a batch every few milliseconds, so a long silence means waiting.
    """
    running = [rank for rank in range(nproc) if not (folder / f"rank{rank}.json").exists()]
    journals = [folder / f"rank{rank}.events" for rank in running]
    if not running or not all(journal.exists() for journal in journals):
        return False
    events = [_journal(journal) for journal in journals]
    if not all(any(e["event"] == "ddp" for e in rank_events) and rank_events[-1]["event"] !=
               "destroy" for rank_events in events):
        return False
    return time.time() - max(journal.stat().st_mtime for journal in journals) > seconds


def _rank_of(file: Path) -> int:
    return int(file.name.split(".")[0].removeprefix("rank"))


def _journal(path: Path) -> list[dict]:
    """The events a rank noted before it was stopped (a cut-off last line is dropped)."""
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            break
    return events


def _kill_run(process: subprocess.Popen, folder: Path) -> None:
    """Kill torchrun and every rank: torchrun starts each rank in a session of its own."""
    if not hasattr(os, "killpg"):  # Windows: no process groups; the ranks' watchdogs end them
        process.kill()
        return
    for pid_file in folder.glob("rank*.pid"):
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        except (ProcessLookupError, PermissionError, ValueError):
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def remove(run: Launch) -> None:
    """Delete a run's folder (config, reports, checkpoint)."""
    shutil.rmtree(run.folder, ignore_errors=True)
