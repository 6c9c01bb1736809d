"""Data-parallel training for real: run a script on several processes, see what each rank did.

* :class:`RunConfig` (``config.py``) -- what the course hands a DDP script: the data, the
  starting weights, the batch size per rank, the epochs, the learning rate and where to save.
* :func:`launch` (``launch.py``) -- ``torchrun --standalone --nproc_per_node=N`` on a script,
  with a time limit; each rank runs under the rank runner (``rank.py``), which notes what the
  rank did, and :func:`launch` returns it as a :class:`Launch` with one :class:`RankReport`
  per rank (``records.py``); :func:`launch_patiently` is the checks' form of it, its limits
  grown with the machine's load and a run that died after every rank reported run again.
* :func:`epoch_coverage` and :func:`reference_parameters` (``analysis.py``) -- which samples
  each epoch saw, and the parameters one process reaches on the same batches.
* :func:`simulate_rank` (``simulate.py``) -- run a script's set-up, in this process, as one
  rank of a simulated machine (GPUs or none), up to the moment it starts its training loop.
"""
from .analysis import epoch_coverage, global_steps, max_difference, reference_parameters
from .config import RecordedDataset, RunConfig
from .launch import launch, launch_patiently, remove, torchrun_command
from .records import CONFIG_ENV, DEADLINE_ENV, REPORTS_ENV, Coverage, Launch, RankReport
from .simulate import SimulatedRank, simulate_rank

__all__ = [
    "CONFIG_ENV", "DEADLINE_ENV", "REPORTS_ENV",
    "Coverage", "Launch", "RankReport", "RecordedDataset", "RunConfig", "SimulatedRank",
    "epoch_coverage", "global_steps", "launch", "launch_patiently", "max_difference",
    "reference_parameters",
    "remove", "simulate_rank", "torchrun_command",
]
