"""Data-parallel step time: 1 process on the full batch vs N ranks on its parts, with torchrun.

    .venv/bin/python benchmarks/multi_gpu.py [--batch 256] [--steps 30]

On the CPU (always): one process against two gloo ranks on the same global batch, each rank
on half of it. With two or more GPUs, also one GPU against all of them with nccl. Each rank
times its own steps after a warm-up (GPU work synchronised, ranks lined up by a barrier), so
the processes' start-up is not counted; each reports the median of five timed windows. Prints
the step times (of the slowest rank), the speed-up and the scaling
efficiency (speed-up / processes), and names the machine. A benchmark, not a test: run it on
an otherwise idle machine.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import textwrap
from pathlib import Path

import torch

from course_utils.lab import report
from course_utils.lab.distributed import launch, remove

RANK_SCRIPT = textwrap.dedent('''
    import json, os, time
    import torch, torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    gpu = torch.cuda.is_available()
    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if gpu else "gloo")
    world = dist.get_world_size()
    batch, steps = int(os.environ["BENCH_BATCH"]) // world, int(os.environ["BENCH_STEPS"])
    torch.manual_seed(0)
    width = int(os.environ["BENCH_WIDTH"])
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, width), torch.nn.ReLU(),
                                torch.nn.Linear(width, 10)).to(device)
    ddp = DDP(model, device_ids=[local_rank] if gpu else None)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(batch, width, device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def step():
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x), y).backward()
        optimizer.step()

    for _ in range(5):  # warm-up: buckets rebuilt, kernels chosen, caches filled
        step()
    windows = []
    for _ in range(5):  # five timed windows; the median resists a noisy neighbour
        if gpu:
            torch.cuda.synchronize()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        if gpu:
            torch.cuda.synchronize()
        windows.append((time.perf_counter() - start) / steps)
    seconds = sorted(windows)[2]
    times = [None] * world
    dist.all_gather_object(times, seconds)
    if dist.get_rank() == 0:
        print(json.dumps({"step_s": max(times), "threads": torch.get_num_threads()}))
    dist.destroy_process_group()
''')


def step_time(script: Path, nproc: int, gpus: bool, threads: int | None = None) -> dict:
    """Seconds per step of the slowest rank, from one torchrun run."""
    saved = os.environ.pop("OMP_NUM_THREADS", None)
    if threads is not None:  # torchrun sets 1 thread per rank only when nproc > 1
        os.environ["OMP_NUM_THREADS"] = str(threads)
    try:
        run = launch(script, nproc, timeout=600, hide_gpus=not gpus)
    finally:
        os.environ.pop("OMP_NUM_THREADS", None)
        if saved is not None:
            os.environ["OMP_NUM_THREADS"] = saved
    try:
        if not run.succeeded:
            raise RuntimeError(f"the benchmark run failed:\n{run.output[-3000:]}")
        return json.loads(run.ranks[0].printed)
    finally:
        remove(run)


def compare(script: Path, label: str, nproc: int, gpus: bool) -> None:
    many = step_time(script, nproc, gpus)
    baselines = [("1 process", step_time(script, 1, gpus))]
    if not gpus:  # on the CPU the one process may use every core, or one like each rank
        baselines.append(("1 process, 1 thread", step_time(script, 1, gpus, threads=1)))
    print(f"{label}: {nproc} ranks {many['step_s'] * 1e3:.2f} ms/step "
          f"({many['threads']} thread(s) each)")
    for name, one in baselines:
        speedup = one["step_s"] / many["step_s"]
        print(f"  vs {name} ({one['threads']} thread(s)): {one['step_s'] * 1e3:.2f} ms/step; "
              f"speed-up {speedup:.2f}x, scaling efficiency {speedup / nproc:.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=256, help="global batch size")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per run")
    parser.add_argument("--width", type=int, default=512, help="hidden width of the MLP")
    args = parser.parse_args()
    os.environ.update(BENCH_BATCH=str(args.batch), BENCH_STEPS=str(args.steps),
                      BENCH_WIDTH=str(args.width))
    gpus = torch.cuda.device_count()
    device = ", ".join(torch.cuda.get_device_name(i) for i in range(gpus)) or "no CUDA GPU"
    print(f"{platform.node()}: {report.describe_machine('cpu')}; {device}")
    print(f"MLP {args.width}-{args.width}-{args.width}-10, global batch {args.batch}, "
          f"median of 5 windows of {args.steps} steps after 5 of warm-up")
    with tempfile.TemporaryDirectory(prefix="bench-ddp-") as folder:
        script = Path(folder) / "rank.py"
        script.write_text(RANK_SCRIPT)
        compare(script, "CPU, gloo", 2, gpus=False)
        if gpus >= 2:
            compare(script, "GPUs, nccl", gpus, gpus=True)
        else:
            print("GPUs, nccl: skipped (needs two or more CUDA GPUs)")


if __name__ == "__main__":
    main()
