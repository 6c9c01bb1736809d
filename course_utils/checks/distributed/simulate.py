"""A script's set-up, run in this process as one rank of a simulated machine, up to its training
loop."""
from __future__ import annotations

import os
import runpy
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ...lab.distributed import CONFIG_ENV, RunConfig
from ...lab.distributed.records import device_indices
from ...probe import SimulatedMachine, StopProbe, patched, run_learner


@dataclass(frozen=True)
class SimulatedRank:
    """A script's set-up, run as one rank of a simulated machine, up to its training loop."""

    init_called: bool
    backend: str | None  # what init_process_group was given (None: torch's default)
    set_device: list  # the arguments of torch.cuda.set_device, as text
    model_device: str | None  # where .to() put the course model, e.g. 'cuda:1'
    ddp_device_ids: list | None  # what DistributedDataParallel was given
    reached_ddp: bool
    error: dict | None  # what the script raised before the DDP wrap (later: the simulation ends)
    current_gpu: int | None = None  # the current CUDA device at the DDP wrap (None: no GPU)
    init_device_id: str | None = None  # init_process_group's device_id, as text
    # DistributedSampler(s) made before the loop: {"rank", "num_replicas"} each
    samplers: list = field(default_factory=list)


def simulate_rank(script: str | Path, machine: dict, *, rank: int, local_rank: int,
                  world_size: int, config: RunConfig | None = None) -> SimulatedRank:
    """Run ``script`` in this process as rank ``rank`` of ``machine`` (a checks.machines spec).

    torch answers device queries as that machine would (probe.SimulatedMachine), and
    ``dist.is_nccl_available()`` says whether its PyTorch build has CUDA (``cuda_version``);
    the process group is pretended, ``Module.to`` only notes where a model would go, the DDP
    wrap only notes what it was given, and the run stops when the script starts its training
    loop (iterates a DataLoader or calls the DDP model), or at an error after the wrap (the
    model is not really on a GPU).
    """
    from torch.nn.parallel import DistributedDataParallel
    from torch.utils.data import DataLoader, DistributedSampler

    gpus = machine["accelerators"].get("cuda", [])  # the node's CUDA GPUs
    seen: dict[str, Any] = {"init": False, "backend": None, "set_device": [], "device": None,
                            "ids": None, "ddp": False, "current": None, "device_id": None,
                            "samplers": []}
    folder = Path(tempfile.mkdtemp(prefix="course-ddp-sim-"))
    (folder / "config.json").write_text((config or RunConfig.example()).to_json())
    env = {"RANK": str(rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(world_size),
           "LOCAL_WORLD_SIZE": str(len(gpus) or 1), "MASTER_ADDR": "localhost",
           "MASTER_PORT": "29500", CONFIG_ENV: str(folder / "config.json")}
    built: list[torch.nn.Module] = []  # the course models the script built
    build_model = RunConfig.build_model
    make_sampler = DistributedSampler.__init__

    def build(config):
        model = build_model(config)
        built.append(model)
        return model

    def init(backend=None, *args, **kwargs):
        device_id = kwargs.get("device_id")
        seen.update(init=True, backend=kwargs.get("backend", backend),
                    device_id=None if device_id is None else str(device_id))

    def to(module, *args, **kwargs):
        target = kwargs.get("device", args[0] if args else None)
        if any(module is model for model in built) and isinstance(target, (str, torch.device, int)):
            device = torch.device(target)
            if device.type == "cuda" and device.index is None:
                device = torch.device("cuda", torch.cuda.current_device())
            seen["device"] = str(device)
        return module

    def wrap(module, inner, device_ids=None, *args, **kwargs):
        torch.nn.Module.__init__(module)
        module.module = inner  # enough for .parameters() and .module
        current = torch.cuda.current_device() if gpus else None
        seen.update(ddp=True, ids=device_indices(device_ids), current=current)

    def sampler(self, *args, **kwargs):
        make_sampler(self, *args, **kwargs)
        seen["samplers"].append({"rank": self.rank, "num_replicas": self.num_replicas})

    def stop(*args, **kwargs):
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
            (dist, "is_nccl_available", lambda: bool(machine.get("cuda_version"))),
            (dist, "barrier", lambda *a, **k: None),
            (dist, "destroy_process_group", lambda *a, **k: None),
            (torch.nn.Module, "to", to), (DistributedDataParallel, "__init__", wrap),
            (DistributedDataParallel, "forward", stop), (DataLoader, "__iter__", stop),
            (DistributedSampler, "__init__", sampler), (RunConfig, "build_model", build),
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
    backend = seen["backend"]
    return SimulatedRank(seen["init"], backend if backend is None else str(backend),
                         seen["set_device"], seen["device"], seen["ids"], seen["ddp"],
                         None if seen["ddp"] else run.error, seen["current"], seen["device_id"],
                         seen["samplers"])
