"""Data-parallel training for real: run a script on several processes, see what each rank did.

* :class:`RunConfig` -- what the course hands a DDP script: the data, the starting weights,
  the batch size per rank, the epochs, the learning rate and where to save. Every rank reads
  the same file (``RunConfig.from_environment()``), so every rank builds the same data and
  model, and one process can recompute what the ranks should have reached.
* :func:`launch` -- ``torchrun --standalone --nproc_per_node=N`` on a script, with a time limit;
  each rank runs under this module's rank runner, which notes what the rank did (the backend it
  asked for, the batches it drew, ``set_epoch``, what it saved and printed, its final weights)
  and :func:`launch` returns it as a :class:`Launch` with one :class:`RankReport` per rank.
* :func:`epoch_coverage` and :func:`reference_parameters` -- which samples each epoch saw, and
  the parameters one process reaches on the same batches.
* :func:`simulate_rank` -- run a script's set-up, in this process, as one rank of a simulated
  GPU machine, up to the moment it wraps the model in DDP.
"""
from __future__ import annotations

import json
import os
import random
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path

import torch
import torch.distributed as dist
from torch.utils.data import Dataset

from .checks.probe_support import (
    SimulatedMachine,
    StopProbe,
    build_mlp,
    describe_error,
    parameter_values,
    patched,
    run_learner,
)

CONFIG_ENV = "COURSE_DDP_CONFIG"  # the RunConfig file every rank reads
REPORTS_ENV = "COURSE_DDP_REPORTS"  # the folder where each rank writes what it did
DEADLINE_ENV = "COURSE_DDP_DEADLINE"  # time.time() after which a rank ends itself
OUTPUT_TAIL = 20_000  # characters of torchrun's own output kept in a Launch


# ------------------------------------------------------------------ what a script is given

def _positive_int(value, name: str, function: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{function}: {name} must be a positive whole number, got {value!r}.")
    return value


def _positive_number(value, name: str, function: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{function}: {name} must be a positive number, got {value!r}.")
    return float(value)


@dataclass(frozen=True)
class RunConfig:
    """Data, starting weights and settings of one training run, as plain numbers."""

    features: list  # samples x 4 floats
    labels: list  # one class (0, 1 or 2) per sample
    weights: dict  # probe_support.build_mlp's spec: w1, b1, w2, b2
    batch_size: int = 4  # per rank
    epochs: int = 2
    lr: float = 0.5
    checkpoint: str = "checkpoint.pt"

    @classmethod
    def example(cls, seed: int = 0, samples: int = 48, batch_size: int = 4, epochs: int = 2,
                lr: float = 0.5, checkpoint: str = "checkpoint.pt") -> RunConfig:
        """A small 3-class problem and a 4-8-3 network, drawn from ``seed``."""
        for name, value in (("samples", samples), ("batch_size", batch_size),
                            ("epochs", epochs)):
            _positive_int(value, name, "RunConfig.example")
        _positive_number(lr, "lr", "RunConfig.example")
        rng = random.Random(seed)

        def draw(rows, cols, scale):
            return [[round(rng.uniform(-scale, scale), 4) for _ in range(cols)]
                    for _ in range(rows)]

        features = draw(samples, 4, 1.0)
        # A rule the network can learn, so that the loss the ranks log goes down.
        labels = [int(x[0] + x[1] > 0) + int(x[2] - x[3] > 0.5) for x in features]
        weights = {"w1": draw(8, 4, 0.5), "b1": draw(1, 8, 0.1)[0],
                   "w2": draw(3, 8, 0.5), "b2": draw(1, 3, 0.1)[0]}
        return cls(features, labels, weights, batch_size, epochs, lr, checkpoint)

    @classmethod
    def from_environment(cls) -> RunConfig:
        """The file named by ``$COURSE_DDP_CONFIG`` (set by :func:`launch`), else ``example()``."""
        path = os.environ.get(CONFIG_ENV)
        return cls.from_json(Path(path).read_text()) if path else cls.example()

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        return cls(**json.loads(text))

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @cached_property
    def dataset(self) -> RecordedDataset:
        """The training data; the same object each time, so sampler and loader share it."""
        return RecordedDataset(torch.tensor(self.features, dtype=torch.float32),
                               torch.tensor(self.labels, dtype=torch.int64))

    def build_model(self) -> torch.nn.Module:
        """Linear(4, 8)-ReLU-Linear(8, 3) with the starting weights, on the CPU."""
        model = build_mlp(self.weights)
        _BUILT_MODELS.append(model)
        if _RECORDER is not None:
            _RECORDER.watch(model)
        return model


class RecordedDataset(Dataset):
    """A map-style dataset that notes which indices each batch asked for."""

    def __init__(self, features: torch.Tensor, labels: torch.Tensor):
        self.features, self.labels = features, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index):
        _note("batch", indices=[int(index)])
        return self.features[index], self.labels[index]

    def __getitems__(self, indices):
        """What a DataLoader calls once per batch: one note per batch."""
        _note("batch", indices=[int(i) for i in indices])
        return [(self.features[i], self.labels[i]) for i in indices]


# ------------------------------------------------------------------ what a rank did

@dataclass(frozen=True)
class RankReport:
    """What one rank did, as its rank runner saw it."""

    rank: int
    local_rank: int
    world_size: int
    master_port: int | None
    visible_gpus: int  # torch.cuda.device_count() in the rank
    events: list  # in order: init, loader, batch, set_epoch, ddp, save, barrier, destroy
    printed: str  # what the rank printed to stdout
    error: dict | None  # probe_support.describe_error() of what the script raised
    parameters: list | None  # the course model's final weights, as nested lists
    ddp_forwards: int  # calls of DistributedDataParallel.forward
    model_forwards: int  # calls of the course model's forward (through DDP or not)
    initialized_at_exit: bool  # a process group was still open when the script ended

    @classmethod
    def from_dict(cls, facts: dict) -> RankReport:
        return cls(**facts)

    def named(self, kind: str) -> list[dict]:
        """The events of one kind, e.g. ``report.named("save")``."""
        return [event for event in self.events if event["event"] == kind]

    def epochs(self) -> list[list[list[int]]]:
        """The batches (lists of sample indices) drawn in each pass over a DataLoader."""
        passes: list[list[list[int]]] = []
        for event in self.events:
            if event["event"] == "loader":
                passes.append([])
            elif event["event"] == "batch" and passes:
                passes[-1].append(event["indices"])
        return passes


@dataclass(frozen=True)
class Launch:
    """One torchrun run: the command, how it ended, its output and each rank's report."""

    command: list
    returncode: int | None
    timed_out: bool
    seconds: float
    output: str  # torchrun's stdout and stderr together (the last OUTPUT_TAIL characters)
    ranks: list  # RankReport per rank that wrote one, by rank
    folder: str  # the config, the reports and the checkpoint
    started: list = field(default_factory=list)  # the ranks that got as far as the script
    progress: list = field(default_factory=list)  # {"rank", "events"} of ranks with no report
    stalled: bool = False  # ended because the ranks waited for each other (launch's stall)

    @property
    def succeeded(self) -> bool:
        return self.returncode == 0 and not (self.timed_out or self.stalled)

    @property
    def shell_command(self) -> str:
        """The command as one would type it: ``torchrun --standalone ...``."""
        launcher = 1 if Path(self.command[0]).name == "torchrun" else 3
        return " ".join(["torchrun", *self.command[launcher:]])

    def where_ranks_stopped(self) -> str:
        """Each unfinished rank's last noted step: 'rank 0 entered dist.barrier(); rank 1 ...'."""
        return "; ".join(f"rank {p['rank']} {_step_text(p['events'])}" for p in self.progress)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, facts: dict) -> Launch:
        ranks = [RankReport.from_dict(report) for report in facts["ranks"]]
        return cls(**{**facts, "ranks": ranks})


@dataclass(frozen=True)
class Coverage:
    """Which samples one epoch drew, over all ranks."""

    epoch: int
    per_rank: list  # how many samples each rank drew
    distinct: int  # different samples drawn
    repeated: int  # draws of a sample drawn before in this epoch
    order: list  # every index drawn, rank 0 first


def epoch_coverage(reports: list[RankReport]) -> list[Coverage]:
    """Per epoch: how many samples each rank drew, how many distinct, how many twice."""
    passes = [report.epochs() for report in reports]
    coverage = []
    for epoch in range(min((len(p) for p in passes), default=0)):
        drawn = [[i for batch in rank_passes[epoch] for i in batch] for rank_passes in passes]
        order = [i for rank_drawn in drawn for i in rank_drawn]
        coverage.append(Coverage(epoch, [len(d) for d in drawn], len(set(order)),
                                 len(order) - len(set(order)), order))
    return coverage


def global_steps(reports: list[RankReport]) -> list[list[list[int]]]:
    """Each optimizer step as the ranks' batches side by side: ``[[rank0 batch, rank1 batch]]``."""
    passes = [report.epochs() for report in reports]
    steps = []
    for epoch in range(min((len(p) for p in passes), default=0)):
        # Ranks with unequal batch counts would have hung in DDP: pair up what they share.
        steps.extend(list(batches) for batches in zip(*(p[epoch] for p in passes), strict=False))
    return steps


def reference_parameters(config: RunConfig, steps: list[list[list[int]]]) -> list:
    """The weights one process reaches with SGD when each step averages the ranks' mean losses.

    That average is what DDP's all-reduce computes: with batches of equal size it is the
    mean loss over their union, i.e. one process training on the full batch.
    """
    model = build_mlp(config.weights)
    features = torch.tensor(config.features, dtype=torch.float32)
    labels = torch.tensor(config.labels, dtype=torch.int64)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)
    for batches in steps:
        optimizer.zero_grad()
        losses = [torch.nn.functional.cross_entropy(model(features[b]), labels[b])
                  for b in batches]
        (sum(losses) / len(losses)).backward()
        optimizer.step()
    return parameter_values(model)


def max_difference(first: list, second: list) -> float:
    """The largest absolute difference between two parameter lists of the same shapes."""
    return max(float((torch.tensor(a, dtype=torch.float64) - torch.tensor(b, dtype=torch.float64)
                      ).abs().max()) for a, b in zip(first, second, strict=True))


# ------------------------------------------------------------------ launching

def torchrun_command(script: str | Path, nproc: int) -> list[str]:
    """``torchrun --standalone --nproc_per_node=N -m course_utils.distributed SCRIPT``.

    ``--standalone`` starts the rendezvous store on port 0, so the operating system hands it
    a free port when it binds: two runs at once (two graders, two notebooks) never clash, and
    no port is picked ahead and released, which another process could take in between.
    """
    torchrun = Path(sys.executable).with_name("torchrun")
    launcher = [str(torchrun)] if torchrun.exists() else [sys.executable, "-m",
                                                           "torch.distributed.run"]
    return [*launcher, "--standalone", f"--nproc_per_node={nproc}", "-m", __name__, str(script)]


def launch(script: str | Path, nproc: int = 2, *, config: RunConfig | None = None,
           timeout: float = 60.0, stall: float | None = None,
           hide_gpus: bool = False) -> Launch:
    """Run ``script`` on ``nproc`` processes with torchrun and return what each rank did.

    The script gets ``config`` (default ``RunConfig.example()``) through
    ``RunConfig.from_environment()``, its checkpoint path moved into a fresh folder. After
    ``timeout`` seconds every process of the run is killed and ``timed_out`` is set. With
    ``stall``, the run is also ended (``stalled``) once every rank still running has wrapped
    its model in DDP and none has noted anything for ``stall`` seconds: they are waiting for
    each other. ``hide_gpus`` sets ``CUDA_VISIBLE_DEVICES=""`` for the ranks.
    """
    path = Path(script)
    if not path.is_file():
        raise ValueError(f"launch(): no script file at {str(script)!r}; write it first "
                         "(e.g. with %%writefile) and pass its path.")
    _positive_int(nproc, "nproc", "launch")
    timeout = _positive_number(timeout, "timeout", "launch")
    stall = None if stall is None else _positive_number(stall, "stall", "launch")
    folder = Path(tempfile.mkdtemp(prefix="course-ddp-"))
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
    reader = threading.Thread(target=lambda: output.extend(process.stdout), daemon=True)
    reader.start()  # a full pipe would block torchrun: keep draining it
    ending = _wait(process, folder, nproc, started + timeout, stall)
    if ending:
        _kill_run(process, folder)
    process.wait()
    reader.join(timeout=10)
    process.stdout.close()
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


def _step_text(events: list[dict]) -> str:
    if not events:
        return "had not reached init_process_group"
    return {"batch": "last drew a batch (its backward then waits in DDP's all-reduce)",
            "barrier": "last entered dist.barrier()", "init": "last entered init_process_group",
            "ddp": "last wrapped the model in DDP"}.get(events[-1]["event"],
                                                        f"last called {events[-1]['event']}")


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


# ------------------------------------------------------------------ inside each rank

_RECORDER: _RankRecorder | None = None  # set in a rank run by launch()
_BUILT_MODELS: list = []  # every model RunConfig.build_model() made in this process


def _note(kind: str, **facts) -> None:
    if _RECORDER is not None:
        _RECORDER.note({"event": kind, **facts})


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
        self.model = model

        def count(module, args):
            self.model_forwards += 1
        model.register_forward_pre_hook(count)

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

        original_ddp_init = DistributedDataParallel.__init__

        def ddp_init(module, inner, device_ids=None, *args, **kwargs):
            original_ddp_init(module, inner, device_ids, *args, **kwargs)
            # Noted once built: building imports torch._dynamo, seconds without a note.
            _note("ddp", wraps_course_model=inner is self.model, device_ids=_indices(device_ids))

        def init(backend=None, *args, **kwargs):
            backend = kwargs.get("backend", backend)
            _note("init", backend=backend if backend is None else str(backend))

        with patched([
            before(dist, "init_process_group", init),
            before(dist, "barrier", lambda *a, **k: _note("barrier")),
            before(dist, "destroy_process_group", lambda *a, **k: _note("destroy")),
            before(DataLoader, "__iter__", lambda *a, **k: _note("loader")),
            before(DistributedSampler, "set_epoch", lambda sampler, epoch: _note(
                "set_epoch", epoch=int(epoch))),
            before(torch, "save", lambda obj, *a, **k: _note("save", **_saved(obj))),
            (DistributedDataParallel, "__init__", ddp_init),
            before(DistributedDataParallel, "forward", ddp_forward),
            (sys, "stdout", _Tee(sys.stdout, self.printed)),
        ]):
            yield

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


def _indices(device_ids) -> list | None:
    """device_ids as GPU indices (or the text of what was passed)."""
    if device_ids is None:
        return None
    out = []
    for item in device_ids:
        if isinstance(item, int) and not isinstance(item, bool):
            out.append(item)
        else:
            try:
                out.append(torch.device(item).index)
            except (RuntimeError, TypeError):
                out.append(str(item))
    return out


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


def _run_rank(argv: list[str]) -> int:
    """``python -m course_utils.distributed SCRIPT [ARGS]``: run SCRIPT as this rank, note it."""
    global _RECORDER
    script, folder = argv[0], os.environ.get(REPORTS_ENV)
    sys.argv = list(argv)
    if not folder:  # run by hand: just the script
        runpy.run_path(script, run_name="__main__")
        return 0
    rank = os.environ.get("RANK", "0")
    Path(folder, f"rank{rank}.pid").write_text(str(os.getpid()))
    deadline = float(os.environ.get(DEADLINE_ENV, time.time() + 3600))
    threading.Thread(target=_watchdog, args=(deadline,), daemon=True).start()
    _RECORDER = recorder = _RankRecorder(journal=Path(folder, f"rank{rank}.events"))
    error = None
    with recorder.installed():
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as stop:
            if stop.code not in (0, None):
                error = describe_error(stop)
        except BaseException as raised:  # noqa: BLE001 - the script's error is data
            error = describe_error(raised)
            import traceback
            traceback.print_exc()  # the learner still sees the full traceback in the output
    report = recorder.report(error)
    partial = Path(folder, f"rank{rank}.json.part")
    partial.write_text(json.dumps(asdict(report)))
    partial.rename(Path(folder, f"rank{rank}.json"))  # readers never see half a file
    return 1 if error else 0


# ------------------------------------------------------------------ a simulated GPU node

@dataclass(frozen=True)
class SimulatedRank:
    """A script's set-up, run as one rank of a simulated GPU machine, up to the DDP wrap."""

    init_called: bool
    backend: str | None  # what init_process_group was given (None: torch's default)
    set_device: list  # the arguments of torch.cuda.set_device, as text
    model_device: str | None  # where .to() put the course model, e.g. 'cuda:1'
    ddp_device_ids: list | None  # what DistributedDataParallel was given
    reached_ddp: bool
    error: dict | None


def simulate_rank(script: str | Path, machine: dict, *, rank: int, local_rank: int,
                  world_size: int, config: RunConfig | None = None) -> SimulatedRank:
    """Run ``script`` in this process as rank ``rank`` of ``machine`` (a checks.machines spec).

    torch answers device queries as that machine would (probe_support.SimulatedMachine);
    the process group is pretended, ``Module.to`` only notes where a model would go, and the
    run stops when the script constructs DistributedDataParallel.
    """
    from torch.nn.parallel import DistributedDataParallel

    seen = {"init": False, "backend": None, "set_device": [], "device": None, "ids": None,
            "ddp": False}
    folder = Path(tempfile.mkdtemp(prefix="course-ddp-sim-"))
    (folder / "config.json").write_text((config or RunConfig.example()).to_json())
    env = {"RANK": str(rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(world_size),
           "LOCAL_WORLD_SIZE": str(len(machine["gpus"]) or 1), "MASTER_ADDR": "localhost",
           "MASTER_PORT": "29500", CONFIG_ENV: str(folder / "config.json")}
    built = len(_BUILT_MODELS)

    def init(backend=None, *args, **kwargs):
        seen.update(init=True, backend=kwargs.get("backend", backend))

    def to(module, *args, **kwargs):
        target = kwargs.get("device", args[0] if args else None)
        if module in _BUILT_MODELS[built:] and isinstance(target, (str, torch.device, int)):
            device = torch.device(target)
            if device.type == "cuda" and device.index is None:
                device = torch.device("cuda", torch.cuda.current_device())
            seen["device"] = str(device)
        return module

    def wrap(module, inner, device_ids=None, *args, **kwargs):
        seen.update(ddp=True, ids=_indices(device_ids))
        raise StopProbe()

    def set_device(original, device):
        seen["set_device"].append(str(device))
        return original(device)

    saved_env = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        with SimulatedMachine(machine), patched([
            (dist, "init_process_group", init), (dist, "is_initialized", lambda: seen["init"]),
            (dist, "get_rank", lambda *a: rank), (dist, "get_world_size", lambda *a: world_size),
            (dist, "is_nccl_available", lambda: bool(machine["gpus"])),
            (dist, "barrier", lambda *a, **k: None),
            (dist, "destroy_process_group", lambda *a, **k: None),
            (torch.nn.Module, "to", to), (DistributedDataParallel, "__init__", wrap),
        ]):
            original_set_device = torch.cuda.set_device
            with patched([(torch.cuda, "set_device",
                           lambda device: set_device(original_set_device, device))]):
                run = run_learner(runpy.run_path, str(script), run_name="__main__")
    finally:
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(folder, ignore_errors=True)
        del _BUILT_MODELS[built:]  # the kernel keeps no model of a simulated run
    backend = seen["backend"]
    return SimulatedRank(seen["init"], backend if backend is None else str(backend),
                         seen["set_device"], seen["device"], seen["ids"], seen["ddp"], run.error)


if __name__ == "__main__":
    # Run by torchrun as `-m course_utils.distributed`: use the imported module, the one the
    # script's own `from course_utils.distributed import RunConfig` will find, not this copy.
    import importlib

    sys.exit(importlib.import_module("course_utils.distributed")._run_rank(sys.argv[1:]))
