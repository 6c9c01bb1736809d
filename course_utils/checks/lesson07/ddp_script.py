"""The DDP script: torchrun on 2 CPU ranks (gloo), and one rank of a simulated 2-GPU node."""
from __future__ import annotations

import random
from dataclasses import asdict
from itertools import pairwise

from ...probe import describe
from .. import machines
from ..framework import case, check, expect_no_error, fail
from .ddp_script_parts import expect_right_gpu_node, expect_run_finished

# A run takes about 10 s of CPU (three processes import torch). A deadlock is caught by the
# stall rule within seconds of the DDP wrap; the time limit only stops a run that never gets
# that far, and is generous so that a busy machine is not mistaken for a broken script. Both
# grow with the machine's load (the probe multiplies them by load average / CPUs, up to
# MAX_SLOWDOWN): on a busy machine honest work is slow, not broken.
TIMEOUT_S = 60.0
STALL_S = 6.0  # after the DDP wrap, this long without a note from any rank means they wait
MAX_SLOWDOWN = 5.0


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
            "timeout_s": TIMEOUT_S, "stall_s": STALL_S, "max_slowdown": MAX_SLOWDOWN}


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
    busy = os.getloadavg()[0] / (os.cpu_count() or 1) if hasattr(os, "getloadavg") else 1.0
    slowdown = min(max(1.0, busy), inputs["max_slowdown"])
    runs = []
    while len(runs) < 2:  # once more if every rank reported and the run still died
        runs.append(launch(script, 2, config=config, timeout=inputs["timeout_s"] * slowdown,
                           stall=inputs["stall_s"] * slowdown, hide_gpus=True))
        remove(runs[-1])
        if not runs[-1].died_after_reporting(2):
            break
    return {"script": None, "simulated": asdict(simulated), "launch": runs[-1].to_dict(),
            "attempts": len(runs)}


def _success(inputs: dict) -> str:
    config, node = inputs["config"], inputs["node"]
    return (f"On 2 CPU ranks (gloo), each of {config['epochs']} epochs drew all "
            f"{len(config['labels'])} samples once, in a new order; the weights match one "
            "process on the full batches; only rank 0 printed and saved model.module's "
            "state_dict; every rank destroyed its process group. As rank "
            f"{node['rank']} (LOCAL_RANK {node['local_rank']}) of a simulated node with two "
            f"GPUs it picks nccl and cuda:{node['local_rank']}.")


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
    expect_run_finished(run, inputs["stall_s"])
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
        expect_right_gpu_node(simulated, node, gpu_node)
