"""Lesson 07's DDP-script check, the trusted side of it: what the check runs, never what a
learner imports (docs/architecture.md).

* :func:`simulate_rank` (``simulate.py``) -- a script's set-up, in this process, as one rank
  of a simulated machine (GPUs or none), up to the moment it starts its training loop.
* :func:`launch_patiently` (``patient.py``) -- the learner's ``launch`` for a verdict: limits
  grown with the machine's load, a run that died after every rank reported run again.
* ``evidence.py`` -- rank 0's checkpoint read without trusting it, the weights one process
  reaches on the reported batches, and whether the checkpoint confirms the ranks' reports.
* ``trial.py`` -- the trial itself (simulated rank, then torchrun on 2 CPU ranks), in the
  learner's kernel or, when grading, as ``python -m course_utils.checks.distributed.trial``
  in the grader's sandbox.
"""
from .patient import launch_patiently
from .simulate import SimulatedRank, simulate_rank

__all__ = ["SimulatedRank", "launch_patiently", "simulate_rank"]
