"""``course cluster-check``: whether one task of the Slurm grading script fits a node.

Slurm accepts a job no node can ever run and leaves it pending (``squeue``'s reason
``PartitionConfig`` or ``Resources``) without an error. This reads the script's
``#SBATCH --cpus-per-task`` and ``--mem`` (what ``sbatch`` would use unless told otherwise on
its command line, as here), asks ``sinfo`` for each node's CPUs and memory, and says which
nodes fit, or refuses in one line with the largest request that would.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SBATCH_LINE = re.compile(r"^#SBATCH\s+--(cpus-per-task|mem|partition)[= ](\S+)", re.MULTILINE)
MEMORY = re.compile(r"^(\d+)([KMGT]?)B?$", re.IGNORECASE)
MB_PER_UNIT = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}


@dataclass(frozen=True)
class TaskRequest:
    """What one array task asks of a node."""

    cpus: int
    memory_mb: int
    partition: str = ""  # "": any partition sinfo lists


@dataclass(frozen=True)
class Node:
    name: str
    partition: str
    cpus: int
    memory_mb: int


def memory_mb(text: str) -> int:
    """Slurm's --mem value in MB (no suffix: MB)."""
    match = MEMORY.match(text.strip())
    if match is None:
        raise ValueError(f"--mem must be a size like 8G, 4096M or 4096 (MB), got {text!r}.")
    return int(int(match.group(1)) * MB_PER_UNIT[match.group(2).upper()])


def script_request(script: Path, cpus: int | None, memory: str | None,
                   partition: str | None) -> TaskRequest:
    """The script's #SBATCH request, with the command line's values put over it."""
    found = dict(SBATCH_LINE.findall(script.read_text(encoding="utf-8")))
    return TaskRequest(cpus or int(found.get("cpus-per-task", "1")),
                       memory_mb(memory or found.get("mem", "0")),
                       partition if partition is not None else found.get("partition", ""))


def parse_sinfo(text: str) -> list[Node]:
    """``sinfo -N -h -o '%N|%P|%c|%m'`` lines; a partition's default mark (*) dropped."""
    nodes = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 4 and parts[2].isdigit() and parts[3].rstrip("+").isdigit():
            nodes.append(Node(parts[0], parts[1].rstrip("*"), int(parts[2]),
                              int(parts[3].rstrip("+"))))
    return nodes


def verdict(request: TaskRequest, nodes: list[Node]) -> tuple[bool, str]:
    """(fits, one line): the nodes that can run a task, or why none can and what would."""
    asked = f"--cpus-per-task={request.cpus} --mem={request.memory_mb}M"
    candidates = [node for node in nodes
                  if not request.partition or node.partition == request.partition]
    if not candidates:
        where = f"partition {request.partition!r}" if request.partition else "this cluster"
        return False, f"sinfo lists no node in {where}; check the partition (sinfo -s)."
    fitting = sorted({node.name for node in candidates
                      if node.cpus >= request.cpus and node.memory_mb >= request.memory_mb})
    if fitting:
        return True, (f"Fits: a task of {asked} can run on {', '.join(fitting)}.")
    largest = max(candidates, key=lambda node: (node.cpus, node.memory_mb))
    return False, (f"No node can run a task of {asked}: sbatch would accept the job and leave "
                   f"it pending for ever. The largest node is {largest.name} with "
                   f"{largest.cpus} CPUs and {largest.memory_mb} MB: submit with "
                   f"sbatch --cpus-per-task={min(request.cpus, largest.cpus)} "
                   f"--mem={min(request.memory_mb, largest.memory_mb)}M ... (docs/cluster.md).")


def read_nodes() -> list[Node]:
    """Every node's CPUs and memory, from sinfo; ValueError when Slurm is not reachable."""
    if shutil.which("sinfo") is None:
        raise ValueError("sinfo is not on PATH: run course cluster-check on the cluster's "
                         "login node (where sbatch is).")
    done = subprocess.run(["sinfo", "-N", "-h", "-o", "%N|%P|%c|%m"], capture_output=True,
                          text=True, timeout=60, check=False)
    if done.returncode != 0:  # its last line says why (the ones above are how it got there)
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise ValueError(f"sinfo could not reach Slurm ({said}); run course cluster-check "
                         "where sbatch works (SLURM_CONF, slurmctld).")
    return parse_sinfo(done.stdout)
