"""check_ddp_script's rules on the script run as one rank of a simulated node: a node with two
GPUs (a rank of a multi-node run), and a machine without a GPU whose PyTorch has NCCL."""
from __future__ import annotations

from .. import machines
from ..framework import expect_no_error, fail

# A laptop with PyTorch's CUDA build (the default wheel on Linux): NCCL is built, no GPU is there.
CUDA_BUILD_WITHOUT_GPU = {**machines.CPU, "name": "a machine without a GPU, with PyTorch's CUDA "
                          "build", "cuda_version": "12.8"}


def expect_right_gpu_node(simulated, node: dict, where: str) -> None:
    """As one rank of a simulated two-GPU node: nccl, cuda:LOCAL_RANK made current,
    device_ids=[LOCAL_RANK], and a DistributedSampler for the global rank."""
    local, gpus = node["local_rank"], len(machines.gpus(machines.TWO_GPUS))
    asked = [int(d.split(":")[-1]) for d in simulated.set_device if d.split(":")[-1].isdigit()]
    if any(index >= gpus for index in asked) or (
            node["rank"] != local and simulated.model_device == f"cuda:{node['rank']}"):
        fail(f"{where}, your script asked for GPU {node['rank']}: RANK counts processes over "
             "all nodes, LOCAL_RANK on this node.", "use `int(os.environ['LOCAL_RANK'])`.")
    error = simulated.error
    if not simulated.reached_ddp and (error is None or error["raised_in"]):
        fail(f"{where}, your script " + (f"used the GPU before any DDP wrap ({error['type']})"
             if error else "never wrapped the model in DDP") + ": the check simulates the GPUs "
             "up to the training loop.", "wrap the model right after moving it: "
             "`ddp_model = DDP(model, device_ids=[local_rank])` on a GPU.")
    expect_no_error(error, "your script", where=where)
    if simulated.backend not in ("nccl", None):
        fail(f"{where}, your script initialised {simulated.backend!r}: NCCL is the backend for "
             "NVIDIA GPUs.", "`'nccl' if torch.cuda.is_available() else 'gloo'`.")
    if simulated.model_device != f"cuda:{local}":
        fail(f"{where}, the model went to {simulated.model_device or 'no GPU'}: each rank needs "
             f"its own GPU, cuda:{local} here.", "`device = torch.device('cuda', local_rank)`"
             "; `model.to(device)`.")
    if simulated.ddp_device_ids not in (None, [local]):
        fail(f"{where}, DDP got device_ids={simulated.ddp_device_ids}.",
             "pass `device_ids=[local_rank]` on GPUs.")
    if simulated.current_gpu != local and simulated.init_device_id not in (f"cuda:{local}",
                                                                          str(local)):
        fail(f"{where}, the current GPU was still cuda:{simulated.current_gpu} at the DDP wrap, "
             f"and the process group was not bound to cuda:{local}: NCCL's barrier() and "
             "anything made on 'cuda' would use GPU 0, which every rank of the node shares.",
             "call `torch.cuda.set_device(device)` before init_process_group.")
    for sampler in simulated.samplers:
        if sampler["rank"] != node["rank"] or sampler["num_replicas"] != node["world_size"]:
            given = "LOCAL_RANK" if sampler["rank"] == local != node["rank"] else "the rank"
            fail(f"{where}, the DistributedSampler got rank={sampler['rank']} of "
                 f"num_replicas={sampler['num_replicas']}, not rank {node['rank']} of "
                 f"{node['world_size']}: with {given} given, ranks on different nodes draw the "
                 "same share, and other shares are never drawn.",
                 "give it nothing: `DistributedSampler(config.dataset)` asks the process group "
                 "(or pass rank=dist.get_rank(), num_replicas=dist.get_world_size()).")


def expect_right_cpu_node(simulated, node: dict, where: str) -> None:
    """As one rank of a simulated machine without a GPU whose PyTorch has NCCL: gloo, CPU."""
    expect_no_error(simulated.error, "your script", where=where, hints={
        "RuntimeError": "on a machine without a GPU keep to the CPU: choose the device and the "
                        "backend by `torch.cuda.is_available()`."})
    if simulated.backend == "nccl":
        fail(f"{where}, your script initialised 'nccl': NCCL needs GPUs, and PyTorch's CUDA "
             "build has NCCL (dist.is_nccl_available() is True) on machines without one.",
             "choose by the device: `'nccl' if torch.cuda.is_available() else 'gloo'`.")
    if simulated.model_device not in (None, "cpu") or simulated.ddp_device_ids is not None:
        fail(f"{where}, the model went to {simulated.model_device} with DDP device_ids="
             f"{simulated.ddp_device_ids}.", "without a GPU keep the model on the CPU and give "
             "DDP no device_ids.")
