"""A single-node Slurm cluster in a temporary folder, for tests/test_cluster.py.

Debian's `slurm-wlm` and `munge` (`apt-get install -y slurm-wlm munge`): munged runs as the
`munge` user (it refuses root's log folder), slurmctld and slurmd as root, on free ports, with
their configuration, state, spool, logs and sockets all in the folder; proctrack/linuxproc and
no accounting, so that nothing outside the folder is configured. Stopped by process id.
"""
from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

DAEMONS = ("slurmctld", "slurmd", "munged", "mungekey", "sbatch", "squeue", "sinfo", "scancel")


def missing() -> str:
    """Why a cluster cannot be started here ("" when it can)."""
    absent = [name for name in DAEMONS if shutil.which(name) is None
              and not Path("/usr/sbin", name).exists()]
    if absent:
        return f"{', '.join(absent)} not installed: apt-get install -y slurm-wlm munge"
    if os.geteuid() != 0:
        return "slurmd and munged are started as root (and the munge user)"
    return ""


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for probe in sockets:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in sockets]
    finally:
        for probe in sockets:
            probe.close()


def _node_line(name: str) -> str:
    """This machine's CPUs and memory as slurmd sees them (memory capped to leave room)."""
    found = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True).stdout
    fields = dict(part.split("=", 1) for part in found.split() if "=" in part)
    memory = min(int(fields["RealMemory"]) - 1024, 16000)
    return f"NodeName={name} NodeAddr=127.0.0.1 CPUs={fields['CPUs']} RealMemory={memory}"


def _wait_for(predicate, what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {seconds:g} s")
        time.sleep(0.5)


def _stop(pid_file: Path) -> None:
    with contextlib.suppress(OSError, ValueError):
        pid = int(pid_file.read_text().strip())
        os.kill(pid, signal.SIGTERM)
        for _ in range(40):
            os.kill(pid, 0)
            time.sleep(0.25)


@contextlib.contextmanager
def single_node_slurm(folder: Path) -> Iterator[dict[str, str]]:
    """Start munged, slurmctld and slurmd; yield the environment that reaches them."""
    munge = pwd.getpwnam("munge")
    run, keys = folder / "run", folder / "munge"
    for path in (run, keys, folder / "state", folder / "spool", folder / "log"):
        path.mkdir(parents=True)
    folder.chmod(0o755)
    run.chmod(0o755)  # munged wants its socket's folder open to all, and its own key private
    keys.chmod(0o700)
    subprocess.run(["mungekey", "--create", f"--keyfile={keys / 'munge.key'}"], check=True,
                   capture_output=True)
    for path in (run, keys, keys / "munge.key"):
        os.chown(path, munge.pw_uid, munge.pw_gid)
    started = subprocess.run(["munged", f"--socket={run / 'munge.socket'}",
                    f"--key-file={keys / 'munge.key'}", f"--log-file={keys / 'munged.log'}",
                    f"--pid-file={run / 'munged.pid'}", f"--seed-file={keys / 'munged.seed'}"],
                   check=False, capture_output=True, text=True, user=munge.pw_uid,
                   group=munge.pw_gid, extra_groups=[])
    if started.returncode != 0:
        raise RuntimeError(f"munged did not start: {started.stderr.strip()}")
    name = socket.gethostname()
    controller, node = _free_ports(2)
    conf = folder / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=coursetest", f"SlurmctldHost={name}(127.0.0.1)",
        f"SlurmctldPort={controller}", f"SlurmdPort={node}", "SlurmUser=root",
        "SlurmdUser=root", "AuthType=auth/munge", "CredType=cred/munge",
        f"AuthInfo=socket={run / 'munge.socket'}",
        f"StateSaveLocation={folder / 'state'}", f"SlurmdSpoolDir={folder / 'spool'}",
        f"SlurmctldPidFile={run / 'slurmctld.pid'}", f"SlurmdPidFile={run / 'slurmd.pid'}",
        f"SlurmctldLogFile={folder / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={folder / 'log' / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
        "SchedulerType=sched/builtin", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory", "ReturnToService=2", "MpiDefault=none",
        "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
        "SlurmdParameters=config_overrides", "KillWait=30",
        _node_line(name) + " State=UNKNOWN",
        "PartitionName=grade Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""]))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    try:
        subprocess.run(["slurmctld", "-f", str(conf)], check=True, env=env)
        subprocess.run(["slurmd", "-f", str(conf), "-N", name], check=True, env=env)
        _wait_for(lambda: "idle" in subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=env,
            check=False).stdout,
            "the node's coming up idle", 60)
        yield env
    finally:
        for daemon in ("slurmd", "slurmctld", "munged"):
            _stop(run / f"{daemon}.pid")
