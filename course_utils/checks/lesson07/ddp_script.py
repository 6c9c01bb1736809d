"""The DDP script: torchrun on 2 CPU ranks (gloo), and one rank of a simulated 2-GPU node."""
from __future__ import annotations

import random
from dataclasses import asdict

from ...probe import describe
from .. import machines
from ..framework import Outside, case, check, expect_no_error, fail
from .ddp_node_rules import CUDA_BUILD_WITHOUT_GPU, expect_right_cpu_node, expect_right_gpu_node
from .ddp_script_rules import CASES, expect_run_finished

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
    # Always LOCAL_RANK 1 on a later node: LOCAL_RANK 0 or RANK == LOCAL_RANK would hide a
    # missing set_device or a sampler given LOCAL_RANK.
    node = rng.choice([{"rank": 5, "local_rank": 1, "world_size": 6},
                       {"rank": 7, "local_rank": 1, "world_size": 8}]) if hidden else \
        {"rank": 3, "local_rank": 1, "world_size": 4}
    return {"config": asdict(config), "node": node, "machine": machines.TWO_GPUS,
            "cpu_machine": CUDA_BUILD_WITHOUT_GPU,
            "timeout_s": TIMEOUT_S, "stall_s": STALL_S, "max_slowdown": MAX_SLOWDOWN}


def probe(script, inputs):
    """Run the script as one rank of a simulated GPU node, then with torchrun on 2 CPU ranks."""
    import os

    from course_utils.checks.distributed.trial import run_trial

    if not isinstance(script, (str, os.PathLike)) or not os.path.isfile(script):
        shown = repr(str(script))[:200] if isinstance(script, (str, os.PathLike)) else \
            f"{describe(script)['type']}"
        return {"script": shown, "simulated": None, "launch": None}
    return run_trial(script, inputs)


def script_for_grader(script, inputs):
    """When grading: only the script's text; the grader runs the trial in a sandbox."""
    import os

    from course_utils.checks.distributed.trial import script_text

    text = script_text(script)
    if text is None:
        return {"script": repr(str(script))[:200] if isinstance(script, (str, os.PathLike))
                else f"{describe(script)['type']}", "text": None}
    return {"script": None, "text": text}


def trial_by_grader(inputs: dict, facts: dict, sandbox) -> dict:
    """The grader's side: the trial of the script's text, on inputs drawn at grading time."""
    from ..distributed.trial import trial_outside

    if not isinstance(facts.get("text"), str):
        return {"script": str(facts.get("script"))[:200], "simulated": None, "launch": None}
    return trial_outside(facts["text"], inputs, sandbox)


def _success(inputs: dict) -> str:
    config, node = inputs["config"], inputs["node"]
    return (f"On 2 CPU ranks (gloo), each of {config['epochs']} epochs drew all "
            f"{len(config['labels'])} samples once, in a new order; the weights match one "
            "process on the full batches; only rank 0 printed and saved model.module's "
            "state_dict; every rank destroyed its process group. As rank "
            f"{node['rank']} (LOCAL_RANK {node['local_rank']}) of a simulated node with two "
            f"GPUs it picks nccl and cuda:{node['local_rank']}, made current, and samples for "
            f"rank {node['rank']} of {node['world_size']}; without a GPU (PyTorch's CUDA build) "
            "it picks gloo and the CPU.")


@check(success=_success, make_inputs=make_inputs, probe=probe,
       outside=Outside(script_for_grader, trial_by_grader))
def check_ddp_script(inputs, observations, hidden):
    from ...lab import distributed as ddp
    from ..distributed import SimulatedRank
    from ..distributed.evidence import CheckpointFacts, unconfirmed

    if observations.get("trial_error"):
        fail(f"The check could not try your script: {observations['trial_error']}.",
             "run this check in the notebook and read what it says.")
    if observations["simulated"] is None:
        fail(f"`script` is {observations['script']}, not the path of a script file.",
             "run the %%writefile cell of the exercise, then run this check again.")
    simulated = SimulatedRank(**observations["simulated"])
    node = inputs["node"]
    gpu_node = (f"As rank {node['rank']} (LOCAL_RANK {node['local_rank']}) of a simulated node "
                "with two GPUs")
    if observations["launch"] is None:
        expect_no_error(simulated.error, "your script", where=gpu_node)
    run = ddp.Launch.from_dict(observations["launch"])
    expect_run_finished(run, inputs["stall_s"])
    config = ddp.RunConfig(**inputs["config"])
    # The reports are written where the script runs: believed only when rank 0's checkpoint,
    # read by the check, holds the weights the check's own training on them reaches.
    problem = unconfirmed(run.ranks, config, CheckpointFacts(**(observations.get("checkpoint")
                                                                or {"kind": "missing"})))
    if problem:
        fail(f"Nothing confirms what the ranks did: {problem}.", "after the training loop, "
             "`if rank == 0: torch.save(ddp_model.module.state_dict(), config.checkpoint)`; "
             "the check trains on the same data itself and compares.")
    for name, weight, rule in CASES:
        with case(name, weight):
            rule(run.ranks, config, ddp.epoch_coverage(run.ranks))
    with case("on simulated nodes: nccl and cuda:LOCAL_RANK with GPUs, gloo without"):
        expect_right_gpu_node(simulated, node, gpu_node)
        expect_right_cpu_node(SimulatedRank(**observations["cpu_node"]), node, gpu_node.replace(
            "a simulated node with two GPUs", inputs["cpu_machine"]["name"] + " (simulated)"))
