"""check_ddp_script's verdicts outside its cases: how the torchrun run ended, and the script
as one rank of a simulated node with two GPUs."""
from __future__ import annotations

from .. import machines
from ..framework import expect_no_error, fail, is_kind


def expect_run_finished(run, stall_s: float) -> None:
    """Every rank ran the script to its end without an error, a deadlock or the time limit."""
    # A rank whose peer died reports a broken connection: show the error that came first.
    reports = sorted(run.ranks, key=lambda r: is_kind(r.error, "DistError"))
    for report in reports:
        if any(e.get("backend") == "nccl" for e in report.named("init")) and \
                not report.visible_gpus:
            fail(f"Rank {report.rank} asked for the nccl backend on a machine without a GPU: "
                 "NCCL works between NVIDIA GPUs only.", "on the CPU use gloo: "
                 "`backend = 'nccl' if torch.cuda.is_available() else 'gloo'`.")
        expect_no_error(report.error, "your script", where=f"On 2 CPU ranks, rank {report.rank}",
                        hints={"ValueError": lambda e: "on the CPU give DDP no device_ids: "
                               "`DDP(model)`; device_ids=[local_rank] is for a model on a GPU."
                               if "parallel/distributed" in (e["raised_in"] or "") else None})
    waiting = run.where_ranks_stopped()
    if run.stalled:
        fail(f"Your script stopped: for {stall_s:.0f} s no rank did anything, so the ranks are "
             f"waiting for each other ({waiting}).", "every rank must make the same collective "
             "calls in the same order (barrier, the all-reduce in backward): look for one "
             "inside `if rank == 0:`, such as a dist.barrier() that only rank 0 reaches.")
    if run.timed_out:
        fail(f"The check could not finish: after {run.seconds:.0f} s the ranks were still "
             f"busy ({waiting or 'still starting'}); a busy machine, or slow work in the "
             "script.", "run the check again in a moment; keep the script to the exercise.")
    if len(run.ranks) != 2:  # complete reports are judged, however the processes ended
        missing = sorted({0, 1} - {report.rank for report in run.ranks})
        fail(f"Rank(s) {missing} ended without finishing the script (torchrun's exit code "
             f"{run.returncode}): {run.error_line()}", "read that line; the launch "
             "cell's output shows the whole run.")


def expect_right_gpu_node(simulated, node: dict, where: str) -> None:
    """As one rank of a simulated two-GPU node: nccl, cuda:LOCAL_RANK, device_ids=[LOCAL_RANK]."""
    local, gpus = node["local_rank"], len(machines.TWO_GPUS["gpus"])
    asked = [int(d.split(":")[-1]) for d in simulated.set_device if d.split(":")[-1].isdigit()]
    if any(index >= gpus for index in asked) or (
            node["rank"] != local and simulated.model_device == f"cuda:{node['rank']}"):
        fail(f"{where}, your script asked for GPU {node['rank']}: RANK counts processes over "
             "all nodes, LOCAL_RANK on this node.", "use `int(os.environ['LOCAL_RANK'])`.")
    error = simulated.error
    if not simulated.reached_ddp and (error is None or error["raised_in"]):
        fail(f"{where}, your script " + (f"used the GPU before any DDP wrap ({error['type']})"
             if error else "never wrapped the model in DDP") + ": the check simulates the GPUs "
             "up to the DDP wrap.", "wrap the model right after moving it: "
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
