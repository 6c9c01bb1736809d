"""What crosses the process boundary of a torchrun run: environment names and each rank's report."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

CONFIG_ENV = "COURSE_DDP_CONFIG"  # the RunConfig file every rank reads
REPORTS_ENV = "COURSE_DDP_REPORTS"  # the folder where each rank writes what it did
DEADLINE_ENV = "COURSE_DDP_DEADLINE"  # time.time() after which a rank ends itself
OUTPUT_TAIL = 20_000  # characters of torchrun's own output kept in a Launch


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
    error: dict | None  # probe.describe_error() of what the script raised
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


# torchrun's report of a failed rank, which only points at the rank's own output
_TORCHRUN = ("torch.distributed.elastic", "ChildFailedError", "torch/distributed/run.py",
             "exitcode", "error_file", "traceback :", "Root Cause", "Failures:", "time      :",
             "host      :", "rank      :", "<NO_OTHER_FAILURES>")
_TELLING = ("Error", "Exception", "terminate called", "Killed", "Segmentation", "Aborted")


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
        return "; ".join(f"rank {p['rank']} {step_text(p['events'])}" for p in self.progress)

    def died_after_reporting(self, nproc: int) -> bool:
        """Every rank reported a clean end, yet the run failed: it died tearing down."""
        return not self.succeeded and not (self.timed_out or self.stalled) and \
            len(self.ranks) == nproc and not any(report.error for report in self.ranks)

    def error_line(self) -> str:
        """The ranks' own last error line in the output, not torchrun's summary of it."""
        lines = [line.strip() for line in self.output.splitlines()
                 if line.strip().strip("=-") and not any(mark in line for mark in _TORCHRUN)]
        telling = [line for line in lines if any(word in line for word in _TELLING)]
        return (telling or lines or ["(no output)"])[-1][:300]

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


def step_text(events: list[dict]) -> str:
    if not events:
        return "had not reached init_process_group"
    return {"batch": "last drew a batch (its backward then waits in DDP's all-reduce)",
            "barrier": "last entered dist.barrier()", "init": "last entered init_process_group",
            "ddp": "last wrapped the model in DDP"}.get(events[-1]["event"],
                                                        f"last called {events[-1]['event']}")


def device_indices(device_ids) -> list | None:
    """device_ids as GPU indices (or the text of what was passed)."""
    if device_ids is None:
        return None
    out: list[int | str | None] = []
    for item in device_ids:
        if isinstance(item, int) and not isinstance(item, bool):
            out.append(item)
        else:
            try:
                out.append(torch.device(item).index)
            except (RuntimeError, TypeError):
                out.append(str(item))
    return out
