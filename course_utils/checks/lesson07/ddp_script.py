"""The DDP script: torchrun on 2 CPU ranks (gloo), and one rank of a simulated 2-GPU node."""
from __future__ import annotations

import random
from dataclasses import asdict
from itertools import pairwise

from ...probe import describe
from .. import machines
from ..framework import case, check, expect_no_error, fail, is_kind

# A run takes about 10 s of CPU (three processes import torch). A deadlock is caught by the
# stall rule within seconds of the DDP wrap; the time limit only stops a run that never gets
# that far, and is generous so that a busy machine is not mistaken for a broken script.
TIMEOUT_S = 60.0
STALL_S = 6.0  # after the DDP wrap, this long without a note from any rank means they wait


def make_inputs(seed: int, hidden: bool) -> dict:
    from ...lab.distributed import RunConfig  # torch loads only when a check needs it

    rng = random.Random(seed)
    config = RunConfig.example(seed=rng.randrange(10**6), samples=2 * rng.randint(12, 20),
                               batch_size=rng.choice([3, 4, 5]), epochs=3,
                               lr=rng.choice([0.2, 0.5])) if hidden else RunConfig.example()
    node = rng.choice([{"rank": 5, "local_rank": 1, "world_size": 6},
                       {"rank": 2, "local_rank": 0, "world_size": 4}]) if hidden else \
        {"rank": 3, "local_rank": 1, "world_size": 4}
    return {"config": asdict(config), "node": node, "machine": machines.TWO_GPUS,
            "timeout_s": TIMEOUT_S, "stall_s": STALL_S}


def probe(script, inputs):
    """Run the script as one rank of a simulated GPU node, then with torchrun on 2 CPU ranks."""
    import os
    from dataclasses import asdict

    from course_utils.lab.distributed import RunConfig, launch, remove, simulate_rank

    if not isinstance(script, (str, os.PathLike)) or not os.path.isfile(script):
        shown = repr(str(script))[:200] if isinstance(script, (str, os.PathLike)) else \
            f"{describe(script)['type']}"
        return {"script": shown, "simulated": None, "launch": None}
    config = RunConfig(**inputs["config"])
    simulated = simulate_rank(script, inputs["machine"], config=config, **inputs["node"])
    error = simulated.error
    if error and error["type"] == "NotImplementedError" and error["raised_in"] is None:
        return {"script": None, "simulated": asdict(simulated), "launch": None}  # the stub
    run = launch(script, 2, config=config, timeout=inputs["timeout_s"], stall=inputs["stall_s"],
                 hide_gpus=True)
    remove(run)
    return {"script": None, "simulated": asdict(simulated), "launch": run.to_dict()}


def _success(inputs: dict) -> str:
    config, node = inputs["config"], inputs["node"]
    return (f"On 2 CPU ranks (gloo), each of {config['epochs']} epochs drew all "
            f"{len(config['labels'])} samples once, in a new order; the weights match one "
            "process on the full batches; only rank 0 printed and saved model.module's "
            "state_dict; every rank destroyed its process group. As rank "
            f"{node['rank']} (LOCAL_RANK {node['local_rank']}) of a simulated node with two "
            f"GPUs it picks nccl and cuda:{node['local_rank']}.")


def _rank_errors(run, stall_s: float) -> None:
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
    if len(run.ranks) != 2 or not run.succeeded:
        fail(f"torchrun ended with exit code {run.returncode} and {len(run.ranks)} rank "
             "report(s).", f"run the launch cell and read the output:\n{run.output[-800:]}")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_ddp_script(inputs, observations, hidden):
    from ...lab import distributed as ddp

    if observations["simulated"] is None:
        fail(f"`script` is {observations['script']}, not the path of a script file.",
             "run the %%writefile cell of the exercise, then run this check again.")
    simulated = ddp.SimulatedRank(**observations["simulated"])
    node = inputs["node"]
    gpu_node = (f"As rank {node['rank']} (LOCAL_RANK {node['local_rank']}) of a simulated node "
                "with two GPUs")
    if observations["launch"] is None:
        expect_no_error(simulated.error, "your script", where=gpu_node)
    run = ddp.Launch.from_dict(observations["launch"])
    _rank_errors(run, inputs["stall_s"])
    ranks, config = run.ranks, ddp.RunConfig(**inputs["config"])
    samples, coverage = len(config.labels), ddp.epoch_coverage(run.ranks)
    with case("each epoch, every sample exactly once over the 2 ranks (DistributedSampler)"):
        if len(coverage) != config.epochs:
            fail(f"The ranks went through the data {len(coverage)} times, not "
                 f"{config.epochs}.", "loop `for epoch in range(config.epochs):`.")
        for epoch in coverage:
            if all(count == samples for count in epoch.per_rank):
                fail(f"In epoch {epoch.epoch} each rank drew all {samples} samples: without a "
                     "DistributedSampler every rank goes through the whole data set, so the "
                     "ranks repeat each other's work.", "give the DataLoader "
                     "`sampler=DistributedSampler(config.dataset)`: each rank gets its share.")
            if epoch.repeated or epoch.distinct != samples:
                fail(f"In epoch {epoch.epoch} the ranks drew {epoch.distinct} different samples "
                     f"of {samples}, {epoch.repeated} draw(s) of a sample twice.",
                     "use `sampler=DistributedSampler(config.dataset)` and no other sampler.")
    with case("a new order every epoch (sampler.set_epoch)"):
        for before, after in pairwise(coverage):
            if before.order == after.order:
                told = any(report.named("set_epoch") for report in ranks)
                fail(f"Epoch {after.epoch} drew the samples in the same order as epoch "
                     f"{before.epoch}" + (": set_epoch was called, but not with a new epoch "
                                          "before the loop." if told else
                                          ": the sampler shuffles with its seed plus the epoch "
                                          "number, and nobody told it the epoch changed."),
                     "call `sampler.set_epoch(epoch)` at the start of every epoch.")
    with case("the same weights as one process on the full batches", 2):
        if any(report.parameters is None for report in ranks):
            fail("A rank never built the model.", "build it with `config.build_model()`.")
        if ddp.max_difference(ranks[0].parameters, ranks[1].parameters) > 1e-5:
            wrapped = [event for r in ranks for event in r.named("ddp")]
            fail("The two ranks ended with different weights: " + (
                "the loop calls the plain model, and DDP averages the gradients only of "
                "forward passes through the wrapper." if wrapped else
                "the model was never wrapped in DDP, so nothing averaged their gradients."),
                "train `ddp_model = DDP(model)`: call `ddp_model(features)` in the loop.")
        steps = ddp.global_steps(ranks)
        if not steps or ddp.max_difference(ranks[0].parameters,
                                           ddp.reference_parameters(config, steps)) > 1e-4:
            fail("The weights differ from one process trained on the same batches.",
                 "keep the given loop: SGD with config.lr, one step per batch.")
    with case("only rank 0 prints"):
        talkers = [r.rank for r in ranks if r.printed.strip()]
        if talkers != [0]:
            fail(f"Rank(s) {talkers} printed: " + ("each line appears once per rank." if
                 len(talkers) > 1 else "rank 0 printed nothing."),
                 "print the loss once per epoch, `if rank == 0:` (rank = dist.get_rank()).")
    with case("only rank 0 saves model.module's state_dict"):
        saves = [(r.rank, event) for r in ranks for event in r.named("save")]
        if [rank for rank, _ in saves] != [0]:
            fail(f"The checkpoint was saved by rank(s) {[rank for rank, _ in saves]}: the "
                 "copies are identical, and ranks writing one file at once can corrupt it.",
                 "save once: `if rank == 0: torch.save(ddp_model.module.state_dict(), "
                 "config.checkpoint)`, then `dist.barrier()`.")
        keys = saves[0][1]["keys"] or []
        if sorted(keys) != ["0.bias", "0.weight", "2.bias", "2.weight"]:
            fail(f"The checkpoint holds {keys[:2] or saves[0][1]['type']}…: " + (
                 "the DDP wrapper's state_dict, whose 'module.' keys a plain model cannot "
                 "load." if any(k.startswith("module.") for k in keys) else "not the model's "
                 "state_dict."), "save `ddp_model.module.state_dict()`.")
    with case("destroy_process_group() on every rank"):
        open_ranks = [r.rank for r in ranks if r.initialized_at_exit or not r.named("destroy")]
        if open_ranks:
            fail(f"Rank(s) {open_ranks} ended with the process group still open: its sockets "
                 "(NCCL communicators on GPUs) are never released.",
                 "end main() with `dist.destroy_process_group()` on every rank.")
    with case("on a GPU node: nccl, cuda:LOCAL_RANK"):
        _gpu_node(simulated, node, gpu_node)


def _gpu_node(simulated, node: dict, where: str) -> None:
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
