"""Data-parallel training for real: run a script on several processes, see what each rank did.

* :class:`RunConfig` (``config.py``) -- what the course hands a DDP script: the data, the
  starting weights, the batch size per rank, the epochs, the learning rate and where to save.
* :func:`launch` (``launch.py``) -- ``torchrun --standalone --nproc_per_node=N`` on a script,
  with a time limit; each rank runs under the rank runner (``rank.py``), which notes what the
  rank did, and :func:`launch` returns it as a :class:`Launch` with one :class:`RankReport`
  per rank (``records.py``).
* :func:`epoch_coverage` and :func:`max_difference` (``analysis.py``) -- which samples each
  epoch saw, and how far two sets of weights are apart.

What lesson 07's check runs (a simulated rank, the trial, the checkpoint as evidence) lives
on the trusted side, in :mod:`course_utils.checks.distributed`.
"""
from .analysis import epoch_coverage, max_difference
from .config import RecordedDataset, RunConfig
from .launch import launch, remove, torchrun_command
from .records import CONFIG_ENV, DEADLINE_ENV, REPORTS_ENV, Coverage, Launch, RankReport

__all__ = [
    "CONFIG_ENV", "DEADLINE_ENV", "REPORTS_ENV",
    "Coverage", "Launch", "RankReport", "RecordedDataset", "RunConfig",
    "epoch_coverage", "launch", "max_difference", "remove", "torchrun_command",
]
