"""Inside each rank: run the learner's script and record what it did (torchrun starts this
through ``python -m course_utils.lab.distributed SCRIPT``).

The recorder watches from outside: it patches torch's entry points and the course's
:class:`RunConfig` / :class:`RecordedDataset` for the length of the run, and writes a
:class:`RankReport` when the script ends.
"""
from __future__ import annotations

import json
import os
import runpy
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NoReturn

import torch
import torch.distributed as dist
from torch.nn.modules.module import register_module_forward_pre_hook

from ...probe import describe_error, parameter_values, patched
from .config import RecordedDataset, RunConfig
from .records import DEADLINE_ENV, REPORTS_ENV, RankReport, device_indices


class _Tee:
    """stdout that also keeps a copy of what the rank printed."""

    def __init__(self, stream, copy: list):
        self.stream, self.copy = stream, copy

    def write(self, text):
        self.copy.append(text)
        return self.stream.write(text)

    def __getattr__(self, name):
        return getattr(self.stream, name)


@dataclass
class _RankRecorder:
    journal: Path | None = None  # events, one JSON line each, written as they happen
    events: list = field(default_factory=list)
    printed: list = field(default_factory=list)
    model: torch.nn.Module | None = None
    ddp_forwards: int = 0
    model_forwards: int = 0

    def note(self, event: dict) -> None:
        self.events.append(event)
        if self.journal is not None:  # if the run hangs, this is where each rank got to
            with self.journal.open("a") as handle:
                handle.write(json.dumps(event) + "\n")

    def watch(self, model: torch.nn.Module) -> None:
        self.model = model  # counted by the global hook in installed(): nothing on the model

    def _count_forward(self, module, args) -> None:
        if module is self.model:
            self.model_forwards += 1

    @contextmanager
    def installed(self) -> Iterator[None]:
        from torch.nn.parallel import DistributedDataParallel
        from torch.utils.data import DataLoader, DistributedSampler

        def before(owner, name, on_call):
            original = getattr(owner, name)

            def wrapper(*args, **kwargs):
                on_call(*args, **kwargs)
                return original(*args, **kwargs)
            return owner, name, wrapper

        def ddp_forward(module, *args, **kwargs):
            self.ddp_forwards += 1

        build_model = RunConfig.build_model

        def build_and_watch(config):
            model = build_model(config)
            self.watch(model)
            return model

        def batch(dataset, indices):
            self.note({"event": "batch", "indices": [int(i) for i in indices]})

        original_ddp_init = DistributedDataParallel.__init__

        def ddp_init(module, inner, device_ids=None, *args, **kwargs):
            original_ddp_init(module, inner, device_ids, *args, **kwargs)
            # Noted once built: building imports torch._dynamo, seconds without a note.
            self.note({"event": "ddp", "wraps_course_model": inner is self.model,
                       "device_ids": device_indices(device_ids)})

        def init(backend=None, *args, **kwargs):
            backend = kwargs.get("backend", backend)
            self.note({"event": "init", "backend": backend if backend is None else str(backend)})

        counting = register_module_forward_pre_hook(self._count_forward)
        with patched([
            before(dist, "init_process_group", init),
            before(dist, "barrier", lambda *a, **k: self.note({"event": "barrier"})),
            before(dist, "destroy_process_group", lambda *a, **k: self.note({"event": "destroy"})),
            before(DataLoader, "__iter__", lambda *a, **k: self.note({"event": "loader"})),
            before(DistributedSampler, "set_epoch", lambda sampler, epoch: self.note(
                {"event": "set_epoch", "epoch": int(epoch)})),
            before(torch, "save", lambda obj, *a, **k: self.note({"event": "save", **_saved(obj)})),
            (RunConfig, "build_model", build_and_watch),
            before(RecordedDataset, "__getitem__", lambda dataset, index: batch(dataset, [index])),
            before(RecordedDataset, "__getitems__", batch),
            (DistributedDataParallel, "__init__", ddp_init),
            before(DistributedDataParallel, "forward", ddp_forward),
            (sys, "stdout", _Tee(sys.stdout, self.printed)),
        ]):
            try:
                yield
            finally:
                counting.remove()

    def report(self, error: dict | None) -> RankReport:
        env = os.environ
        return RankReport(
            rank=int(env.get("RANK", 0)), local_rank=int(env.get("LOCAL_RANK", 0)),
            world_size=int(env.get("WORLD_SIZE", 1)),
            master_port=int(env["MASTER_PORT"]) if env.get("MASTER_PORT") else None,
            visible_gpus=torch.cuda.device_count(), events=self.events,
            printed="".join(self.printed), error=error,
            parameters=parameter_values(self.model) if self.model is not None else None,
            ddp_forwards=self.ddp_forwards, model_forwards=self.model_forwards,
            initialized_at_exit=dist.is_available() and dist.is_initialized())


def _saved(obj) -> dict:
    """What torch.save was given: the keys of a state dict, or the type of anything else."""
    if isinstance(obj, dict):
        return {"keys": [str(key) for key in obj], "type": "dict"}
    return {"keys": None, "type": type(obj).__name__}


def _watchdog(deadline: float) -> None:
    """End this rank at the deadline, or when torchrun (its parent) is gone."""
    parent = os.getppid()
    while time.time() < deadline and os.getppid() == parent:
        time.sleep(0.2)
    os._exit(124)


def run_rank(argv: list[str]) -> int:
    """``python -m course_utils.lab.distributed SCRIPT [ARGS]``: run SCRIPT as this rank and
    note what it does."""
    script, folder = argv[0], os.environ.get(REPORTS_ENV)
    sys.argv = list(argv)
    if not folder:  # run by hand: just the script
        runpy.run_path(script, run_name="__main__")
        return 0
    rank = os.environ.get("RANK", "0")
    Path(folder, f"rank{rank}.pid").write_text(str(os.getpid()))
    deadline = float(os.environ.get(DEADLINE_ENV, time.time() + 3600))
    threading.Thread(target=_watchdog, args=(deadline,), daemon=True).start()
    recorder = _RankRecorder(journal=Path(folder, f"rank{rank}.events"))
    error = None
    with recorder.installed():
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as stop:
            if stop.code not in (0, None):
                error = describe_error(stop)
        except BaseException as raised:  # noqa: BLE001 - the script's error is data
            error = describe_error(raised)
            print_script_traceback(raised)  # the learner still sees where their script failed
    report = recorder.report(error)
    _close_process_group()
    partial = Path(folder, f"rank{rank}.json.part")
    partial.write_text(json.dumps(asdict(report)))
    partial.rename(Path(folder, f"rank{rank}.json"))  # readers never see half a file
    _exit_now(1 if error else 0)


def print_script_traceback(raised: BaseException) -> None:
    """The traceback on stderr without the runner's own frames (runpy's, and the course's
    patches around torch's entry points), which say nothing about the learner's script."""
    import traceback

    package = Path(__file__).resolve().parents[2]  # course_utils/
    runner = {runpy.__file__, "<frozen runpy>"}  # Python 3.11 shows the frozen module's name

    def theirs(frame: traceback.FrameSummary) -> bool:
        return (frame.filename not in runner
                and package not in Path(frame.filename).resolve().parents)

    whole = traceback.TracebackException.from_exception(raised)
    pending, seen = [whole], set()
    while pending:  # the exception and those it was raised from or during
        summary = pending.pop()
        if summary is None or id(summary) in seen:
            continue
        seen.add(id(summary))
        summary.stack = traceback.StackSummary.from_list(
            [frame for frame in summary.stack if theirs(frame)])
        pending += [summary.__cause__, summary.__context__]
    sys.stderr.write("".join(whole.format()))


def _close_process_group() -> None:
    """Destroy a process group the script left open (its report already says so)."""
    if dist.is_available() and dist.is_initialized():
        with suppress(RuntimeError, ValueError):  # a broken group must not hide the report
            dist.destroy_process_group()


def _exit_now(code: int) -> NoReturn:
    """End the rank without interpreter shutdown.

    At shutdown, C++ objects the script dropped (DDP's reducer, gloo's worker threads, the
    store's client) are destroyed in whatever order the garbage collector finds them; a
    std::thread destroyed while still joinable calls std::terminate, and the rank dies with
    ``terminate called without an active exception`` (SIGABRT) after it finished and reported.
    The report is written, so flush what the script printed and leave at once.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
