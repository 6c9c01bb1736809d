"""The DDP script: torchrun on 2 CPU ranks (gloo), and one rank of a simulated 2-GPU node."""
from __future__ import annotations

import random
from dataclasses import asdict

from ...probe import describe
from .. import machines
from ..framework import case, check, expect_no_error, fail
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
    from dataclasses import asdict

    from course_utils.lab.distributed import RunConfig, launch_patiently, remove, simulate_rank

    if not isinstance(script, (str, os.PathLike)) or not os.path.isfile(script):
        shown = repr(str(script))[:200] if isinstance(script, (str, os.PathLike)) else \
            f"{describe(script)['type']}"
        return {"script": shown, "simulated": None, "launch": None}
    config = RunConfig(**inputs["config"])
    simulated = simulate_rank(script, inputs["machine"], config=config, **inputs["node"])
    cpu_node = asdict(simulate_rank(script, inputs["cpu_machine"], config=config, **inputs["node"]))
    error = simulated.error
    if error and error["type"] == "NotImplementedError" and error["raised_in"] is None:
        return {"script": None, "simulated": asdict(simulated), "cpu_node": cpu_node,
                "launch": None}  # the stub
    run = launch_patiently(script, 2, config=config, timeout=inputs["timeout_s"],
                           stall=inputs["stall_s"], max_slowdown=inputs["max_slowdown"],
                           hide_gpus=True)
    remove(run)
    return {"script": None, "simulated": asdict(simulated), "cpu_node": cpu_node,
            "launch": run.to_dict()}


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
    config = ddp.RunConfig(**inputs["config"])
    for name, weight, rule in CASES:
        with case(name, weight):
            rule(run.ranks, config, ddp.epoch_coverage(run.ranks))
    with case("on simulated nodes: nccl and cuda:LOCAL_RANK with GPUs, gloo without"):
        expect_right_gpu_node(simulated, node, gpu_node)
        expect_right_cpu_node(ddp.SimulatedRank(**observations["cpu_node"]), node, gpu_node.replace(
            "a simulated node with two GPUs", inputs["cpu_machine"]["name"] + " (simulated)"))
