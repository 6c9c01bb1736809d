"""Lesson 09's tools: run a script on several ranks and read back each rank's typed records;
count the bytes a rank holds (shards included); time one collective; sum a profile's
communication.

A rank's script joins the group with ``join_process_group()``, measures, and ends with
``save_results(RankResults(...))``; the notebook runs it with ``run_ranks(script)`` and reads
``run.ranks``: the same records, typed, one per rank.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from .args import positive_int, positive_number

RESULTS_ENV = "COURSE_SHARDING_RESULTS"  # the folder where each rank writes its records
OPERATIONS = ("all_reduce", "all_gather", "reduce_scatter")
OUTPUT_TAIL = 20_000  # characters of torchrun's output kept in a ShardingRun


@dataclass(frozen=True)
class StrategyRecord:
    """What one rank held and how long a step took under one strategy."""

    strategy: str  # ddp, zero1, zero2, fsdp
    parameter_bytes: int  # this rank's share of the parameters (its shard, for sharded ones)
    gradient_bytes: int
    optimizer_bytes: int  # the optimizer's per-parameter state (AdamW: two moments)
    step_seconds: float  # median of the timed steps
    difference_from_ddp: float  # largest |weight - DDP's weight| after the same steps


@dataclass(frozen=True)
class CollectiveTiming:
    """One collective on a tensor of ``size_bytes`` (the full, reduced or gathered tensor)."""

    operation: str  # one of OPERATIONS
    size_bytes: int
    seconds: float  # the fastest of the repeats


@dataclass(frozen=True)
class ProfiledCommunication:
    """The collectives the profiler saw in one training step of a strategy."""

    strategy: str
    calls: dict  # the backend's operation name -> how many times it ran
    seconds: float  # their total duration


@dataclass(frozen=True)
class PipelineRecord:
    """One rank's stage of a pipeline trained with ``micro_batches`` per batch
    (lab/pipeline_parallel.py), against the whole model trained alike in one process."""

    micro_batches: int
    step_seconds: float  # median of the timed steps, barrier to barrier: the pipeline's step
    busy_seconds: float  # this rank's computing in such a step (median): the rest is waiting
    loss_difference: float | None  # largest |loss - the whole model's|; None: not the last stage
    gradient_difference: float  # largest |gradient - the whole model's| after the first step
    weight_difference: float  # largest |weight - the whole model's| after the last step


@dataclass(frozen=True)
class RankResults:
    """Everything one rank measured; written as JSON by the rank, read back by run_ranks."""

    rank: int
    world_size: int
    device: str
    strategies: list = field(default_factory=list)  # StrategyRecord
    collectives: list = field(default_factory=list)  # CollectiveTiming
    profiled: list = field(default_factory=list)  # ProfiledCommunication
    facts: dict = field(default_factory=dict)  # other JSON-able findings, by name
    pipeline: list = field(default_factory=list)  # PipelineRecord, one per micro-batch count

    @classmethod
    def from_dict(cls, data: dict) -> RankResults:
        return cls(rank=data["rank"], world_size=data["world_size"], device=data["device"],
                   strategies=[StrategyRecord(**s) for s in data["strategies"]],
                   collectives=[CollectiveTiming(**c) for c in data["collectives"]],
                   profiled=[ProfiledCommunication(**p) for p in data["profiled"]],
                   facts=data["facts"],
                   pipeline=[PipelineRecord(**p) for p in data["pipeline"]])

    def strategy(self, name: str) -> StrategyRecord:
        found = [record for record in self.strategies if record.strategy == name]
        if not found:
            known = [record.strategy for record in self.strategies]
            raise KeyError(f"rank {self.rank} measured no strategy {name!r}; it measured {known}")
        return found[0]


@dataclass(frozen=True)
class ShardingRun:
    """One torchrun run: the command, how it ended, its output and each rank's results."""

    command: list
    returncode: int | None  # None: killed after the time limit
    seconds: float
    output: str
    ranks: list  # RankResults, by rank
    folder: str

    @property
    def succeeded(self) -> bool:
        return self.returncode == 0 and len(self.ranks) > 0

    @property
    def shell_command(self) -> str:
        launcher = 1 if Path(self.command[0]).name == "torchrun" else 3
        return " ".join(["torchrun", *self.command[launcher:]])


def join_process_group() -> torch.device:
    """Join the default group as torchrun's environment says: one GPU per rank with nccl,
    or the CPU with gloo. Returns this rank's device."""
    import torch.distributed as dist

    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return device


def local_bytes(tensors) -> int:
    """Bytes this rank holds for ``tensors``: a sharded tensor (DTensor) counts its local
    shard only; None entries (a gradient not computed yet) count 0."""
    from torch.distributed.tensor import DTensor

    total = 0
    for tensor in tensors:
        if tensor is None:
            continue
        if isinstance(tensor, DTensor):
            tensor = tensor.to_local()
        total += tensor.numel() * tensor.element_size()
    return total


def optimizer_state_bytes(optimizer) -> int:
    """Bytes of an optimizer's per-parameter state on this rank (scalars such as Adam's step
    count left out). A ZeroRedundancyOptimizer counts the optimizer it wraps: this rank's part."""
    inner = getattr(optimizer, "optim", optimizer)
    return local_bytes(value for state in inner.state.values() for value in state.values()
                       if torch.is_tensor(value) and value.dim() > 0)


def _collective(operation: str):
    """The collective's call on whole tensors. PyTorch 2.13 renamed the tensor forms
    (all_gather_into_tensor -> all_gather_single) and deprecated the old names; 2.11 has only
    the old ones."""
    import torch.distributed as dist

    if operation == "all_reduce":
        return lambda output, tensor: dist.all_reduce(tensor)
    if operation == "all_gather":
        return getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def time_collective(operation: str, size_bytes: int, device, repeats: int = 5
                    ) -> CollectiveTiming:
    """Time ``operation`` (all_reduce, all_gather, reduce_scatter) on float32 data whose full
    tensor (reduced, gathered, or scattered from) holds ``size_bytes``; the fastest of
    ``repeats``, each started together by a barrier: on a busy machine other processes only
    ever add time, so the fastest is the closest to the collective's own cost. Every rank must
    call it alike."""
    import torch.distributed as dist

    if operation not in OPERATIONS:
        raise ValueError(f"time_collective(): operation must be one of {OPERATIONS}, "
                         f"got {operation!r}")
    positive_int(size_bytes, "size_bytes", "time_collective")
    positive_int(repeats, "repeats", "time_collective")
    world = dist.get_world_size()
    full = max(size_bytes // 4 // world, 1) * world  # elements: a whole shard per rank
    shard = full // world
    tensor = torch.ones(shard if operation == "all_gather" else full, device=device)
    output = torch.empty(full if operation == "all_gather" else shard, device=device)
    call = _collective(operation)
    times = []
    for _ in range(repeats + 1):  # the first call sets up the backend's buffers: not timed
        dist.barrier()
        _wait(device)
        start = time.perf_counter()
        call(output, tensor)
        _wait(device)
        times.append(time.perf_counter() - start)
    return CollectiveTiming(operation, full * 4, min(times[1:]))


def _wait(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def communication_in(profile, strategy: str) -> ProfiledCommunication:
    """The backend's collectives in a finished ``torch.profiler.profile``: gloo's on the CPU
    (named ``gloo:all_reduce``, ...), NCCL's kernels on a GPU (``ncclDevKernel_...``)."""
    from torch.autograd import DeviceType

    calls: dict[str, int] = {}
    seconds = 0.0
    for event in profile.events():
        name = event.name
        if name.startswith("gloo:"):
            duration = event.cpu_time_total
        elif name.startswith("nccl") and event.device_type == DeviceType.CUDA:
            # the kernels themselves: a CPU-side nccl event's device time would count them twice
            duration = event.device_time_total
        else:
            continue
        calls[name] = calls.get(name, 0) + 1
        seconds += duration / 1e6  # the profiler counts microseconds
    return ProfiledCommunication(strategy, calls, seconds)


def save_results(results: RankResults) -> Path:
    """Write this rank's results where run_ranks() reads them (``$COURSE_SHARDING_RESULTS``)."""
    path = run_folder() / f"rank{results.rank}.json"
    path.write_text(json.dumps(asdict(results)))
    return path


def ranks_for_this_machine() -> int:
    """One rank per GPU where there are two or more; else two CPU ranks."""
    return max(torch.cuda.device_count(), 2)


def torchrun_command(script: str | Path, nproc: int) -> list[str]:
    torchrun = Path(sys.executable).with_name("torchrun")
    launcher = [str(torchrun)] if torchrun.exists() else [sys.executable, "-m",
                                                           "torch.distributed.run"]
    return [*launcher, "--standalone", f"--nproc-per-node={nproc}", str(script)]


def run_ranks(script: str | Path, nproc: int | None = None, *, timeout: float = 120.0
              ) -> ShardingRun:
    """Run ``script`` with ``torchrun --standalone`` on ``nproc`` ranks (default: one per GPU
    where there are two or more, else two CPU ranks, the GPUs hidden from them) and read back
    what each rank saved with save_results(). After ``timeout`` seconds the run is killed."""
    path = Path(script)
    if not path.is_file():
        raise ValueError(f"run_ranks(): no script file at {str(script)!r}; write it first "
                         "(e.g. with %%writefile) and pass its path.")
    nproc = ranks_for_this_machine() if nproc is None else positive_int(nproc, "nproc",
                                                                         "run_ranks")
    timeout = positive_number(timeout, "timeout", "run_ranks")
    folder = Path(tempfile.mkdtemp(prefix="course-sharding-"))
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{RESULTS_ENV: str(folder)})
    if torch.cuda.device_count() < max(nproc, 2):
        env["CUDA_VISIBLE_DEVICES"] = ""  # one GPU shared by two ranks is no test of NCCL
    command = torchrun_command(path, nproc)
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, errors="replace",
                               start_new_session=True)  # its own group: killed as one
    try:
        output, _ = process.communicate(timeout=timeout)
        returncode = process.returncode
    except subprocess.TimeoutExpired:
        output, returncode = _stop(process), None
    ranks = [RankResults.from_dict(json.loads(file.read_text()))
             for file in sorted(folder.glob("rank*.json"),
                                key=lambda file: int(file.stem.removeprefix("rank")))]
    return ShardingRun(command, returncode, time.monotonic() - started,
                       output[-OUTPUT_TAIL:], ranks, str(folder))


def _stop(process: subprocess.Popen) -> str:
    """End a run that is out of time: SIGTERM first, which torchrun passes on to its ranks
    (each runs in a session of its own), then SIGKILL for whatever is left of torchrun."""
    process.terminate()
    try:
        return process.communicate(timeout=10)[0]
    except subprocess.TimeoutExpired:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
        return process.communicate()[0]


def run_folder() -> Path:
    """The folder of this run (in a rank): for files the ranks share, such as a checkpoint."""
    folder = os.environ.get(RESULTS_ENV)
    if not folder:
        raise RuntimeError(f"run_folder(): ${RESULTS_ENV} is not set: start the script with "
                           "sharding.run_ranks(script), which sets it for every rank.")
    return Path(folder)
