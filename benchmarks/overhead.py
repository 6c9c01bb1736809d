"""What each overhead-removing technique does, and where it pays: lesson 08's closing comparison.

    .venv/bin/python benchmarks/overhead.py [--min-run-time 0.3] [--no-profile]

On this machine's device (course_utils.get_device), for three workloads, one AdamW training step:

* "MLP" -- lesson 08's model (64-256-10 with GELU, batch 256): little to fuse and few launches,
  the counter-example;
* "residual" -- 10 blocks x + Linear(GELU(LayerNorm(x))), width 512, batch 32: many small launches
  (launch-bound), and element-wise chains to fuse;
* "residual, large batch" -- the same model at batch 65536 (128 on a CPU) with TF32 matmuls on a
  GPU: the device is the bottleneck, and the element-wise work that Inductor fuses outweighs the
  matmuls. (With float32 matmuls on CUDA cores the matmuls dominate and fusion cannot show.)

The residual batches have a symbolic size (torch._dynamo.mark_dynamic): one compilation serves
both residual workloads and the sweep.

Rows, each the median of timing.benchmark (warmed up, synchronised), with the speed-up over the
eager row of its workload, the host time per step (until the call returns, without waiting for
the device), operators per step, and on a GPU launches and kernels per step (a light profile):

* eager, fused AdamW;
* the forward and loss compiled with backend="eager" (Dynamo only), "aot_eager" (+ AOTAutograd)
  and "inductor" (+ code generation): where a compiled call's own CPU cost comes from;
* the whole step compiled: the forward with its loss, then torch.compile of the optimizer's step
  (PyTorch's recipe "Compiling the optimizer with torch.compile"; foreach AdamW, which Inductor
  fuses);
* CUDA only: the same whole step with mode="reduce-overhead" (CUDAGraph Trees record the forward,
  the backward and the optimizer step as graphs), with the counter
  torch._dynamo.utils.counters["inductor"]["cudagraph_skips"] (a row with skips is not a graph);
* CUDA only: the whole step captured by hand in ONE CUDA graph (PyTorch's CUDA semantics notes,
  "whole-network capture": static input and target, fused capturable AdamW, warm-up on a side
  stream, grads set to None before capture), replayed after copying the batch in.

Then a batch sweep of the residual workload (TF32 on a GPU): eager, whole step compiled and on
CUDA the whole-step graph, with the host time per step: where the step time rises above the host
time, the device is the bottleneck, launch overhead stops mattering and fusion starts to.

Compile time (the first call) is printed apart and is not in any timed row. The last line is a
JSON summary (benchmarks/gpu_summary.py reads it). Without a compiler for Inductor
(overhead.inductor_status) the rows that need it say why they are skipped. Run it on an
otherwise idle machine; it is a benchmark, not a test.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

import torch
import torch._dynamo
import torch.nn.functional as F
from torch import nn
from torch._dynamo.utils import counters

from course_utils import get_device, overhead, report, synchronize, timing

CLASSES = 10


class Block(nn.Module):
    """x + Linear(GELU(LayerNorm(x))): a pre-norm residual block; at a small batch, launch-bound."""

    def __init__(self, width: int):
        super().__init__()
        self.norm, self.linear = nn.LayerNorm(width), nn.Linear(width, width)

    def forward(self, x):
        return x + self.linear(F.gelu(self.norm(x)))


def residual_model(device, width: int = 512, blocks: int = 10) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(*[Block(width) for _ in range(blocks)],
                         nn.Linear(width, CLASSES)).to(device)


def mlp_model(device) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, CLASSES)).to(device)


@dataclass(frozen=True)
class Workload:
    model: Callable[[torch.device], nn.Module]
    width: int  # of the input
    batch: int  # on a GPU
    cpu_batch: int  # on a CPU, which does the arithmetic itself
    tf32: bool  # float32 matrix multiplications on a GPU's TF32 tensor cores (lesson 06)
    what: str

    def size(self, device) -> int:
        return self.batch if device.type == "cuda" else self.cpu_batch


WORKLOADS = {
    "MLP": Workload(mlp_model, 64, 256, 256, False,
                    "lesson 08's MLP 64-256-10, batch 256 (the counter-example)"),
    "residual": Workload(residual_model, 512, 32, 32, False,
                         "10 residual blocks x + Linear(GELU(LayerNorm(x))), width 512, batch 32: "
                         "launch-bound"),
    "residual, large batch": Workload(
        residual_model, 512, 65536, 128, True,
        "the same model at batch 65536 (128 on a CPU), TF32 matmuls on a GPU: the device is the "
        "bottleneck, and its element-wise work (fusible) outweighs the matmuls"),
}
SWEEP_CUDA, SWEEP_CPU = [8, 64, 512, 4096, 16384, 65536], [8, 32, 128]


def batch(device, width: int, size: int, dynamic: bool = False):
    """A batch; ``dynamic``: its size marked symbolic, so one compilation serves every size (the
    residual workloads and the sweep share their compiled code: minutes of C++ on a CPU)."""
    generator = torch.Generator().manual_seed(1)
    x, y = (torch.randn(size, width, generator=generator).to(device),
            torch.randint(0, CLASSES, (size,), generator=generator).to(device))
    if dynamic:
        torch._dynamo.mark_dynamic(x, 0)
        torch._dynamo.mark_dynamic(y, 0)
    return x, y


@contextmanager
def tf32_matmuls(enabled: bool):
    """float32 matmuls on TF32 tensor cores (the API Inductor's own advice names), then back."""
    if not enabled:  # not even set to what it is: that changes Inductor's cache key
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


@contextmanager
def quiet_compile_warnings():
    """A block without two warnings that say nothing about these figures: Inductor's advice to
    use TF32 (every row computes in float32) and capturable AdamW's run outside a graph."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="TensorFloat32 tensor cores")
        warnings.filterwarnings("ignore", message=".*capturable=True.*")
        # Dynamo logs once that it leaves the optimizer's profiler range out of its graph.
        torch._logging.set_logs(dynamo=logging.ERROR)
        try:
            yield
        finally:
            torch._logging.set_logs()


# ------------------------------------------------------------------ the steps


def eager_step(model, x, y) -> Callable[[], None]:
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)

    def step():
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    return step


def region_step(model, x, y, backend: str) -> Callable[[], None]:
    """Only the forward and its loss compiled, with ``backend``; the fused optimizer eager."""
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    loss_of = torch.compile(lambda x, y: F.cross_entropy(model(x), y), backend=backend)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_of(x, y).backward()
        optimizer.step()
    return step


def whole_step(model, x, y, **compile_args) -> Callable[[], None]:
    """The forward with its loss and the optimizer's step compiled (the backward runs the
    compiled backward); with mode="reduce-overhead" each of the three replays as a CUDA graph."""
    optimizer = torch.optim.AdamW(model.parameters(), foreach=True)  # Inductor fuses foreach ops
    loss_of = torch.compile(lambda x, y: F.cross_entropy(model(x), y), **compile_args)

    @torch.compile(**compile_args)
    def optimizer_step():
        optimizer.step()

    graphs = compile_args.get("mode") == "reduce-overhead"
    inputs = {"x": x, "y": y}

    def step():
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()  # a new step: last step's outputs are free
        optimizer.zero_grad(set_to_none=True)
        loss_of(inputs["x"], inputs["y"]).backward()
        optimizer_step()
    step.inputs = inputs  # the sweep hands in other batches
    return step


def captured_step(model, x, y) -> Callable[[], None]:
    """The whole step in one CUDA graph, as in PyTorch's "whole-network capture" recipe."""
    optimizer = torch.optim.AdamW(model.parameters(), fused=True, capturable=True)
    static_x, static_y = x.clone(), y.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):        # warm-up on a side stream: creates the optimizer state
        for _ in range(3):
            optimizer.zero_grad(set_to_none=True)
            F.cross_entropy(model(static_x), static_y).backward()
            optimizer.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)  # backward then allocates .grad from the graph's pool
    with torch.cuda.graph(graph):
        static_loss = F.cross_entropy(model(static_x), static_y)
        static_loss.backward()
        optimizer.step()

    def step(batch_x=x, batch_y=y):
        static_x.copy_(batch_x)           # new data into the captured input's memory
        static_y.copy_(batch_y)
        graph.replay()                    # forward, loss, backward and AdamW: one launch
    step.static = (static_x, static_y, static_loss)
    return step


# ------------------------------------------------------------------ measuring a row


def measure(name, build, device, args, skipped=None) -> dict:
    """Build the step (compiling or capturing it: timed apart), warm it up, time it, count it."""
    row = {"row": name}
    if skipped:
        row["skipped"] = skipped
        return row
    torch._dynamo.reset()                 # each row compiles from scratch, within the limits
    counters.clear()
    try:
        return _measured(row, build, device, args)
    except Exception as error:  # noqa: BLE001 - one row's failure must not lose the other rows
        row["failed"] = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}"
        return row


def _measured(row: dict, build, device, args) -> dict:
    with quiet_compile_warnings():
        synchronize(device)
        started = time.perf_counter()
        step = build()
        step()                            # the first call compiles (or captures) the step
        synchronize(device)
        row["first_call_s"] = time.perf_counter() - started
        for _ in range(3 if device.type == "cuda" else 1):
            step()                        # CUDAGraph Trees record on a later call
        timed = timing.benchmark(step, device, min_run_time=args.min_run_time)
        row["cudagraph_skips"] = counters["inductor"]["cudagraph_skips"]
        cost = overhead.step_cost(step, device) if args.profile else None
    row.update(ms=timed.median_s * 1e3, fastest_ms=timed.min_s * 1e3, noisy=timed.noisy,
               warning=timed.warning(), host_ms=cost and cost.host_s * 1e3,
               operators=cost and cost.operators, launches=cost and cost.launches,
               kernels=cost and cost.kernels)
    return row


def rows_for(workload: str, device, args, status) -> list[dict]:
    chosen = WORKLOADS[workload]
    make = chosen.model
    cuda = device.type == "cuda"
    x, y = batch(device, chosen.width, chosen.size(device), dynamic=workload != "MLP")
    no_inductor = None if status.ready else f"no Inductor here: {status.reason}"
    gpu_only = None if cuda else f"CUDA only (this is {device.type})"
    plan = [
        ("eager, fused AdamW", lambda: eager_step(make(device), x, y), None),
        ("compile fwd+loss, backend=eager", lambda: region_step(make(device), x, y, "eager"),
         None),
        ("compile fwd+loss, backend=aot_eager",
         lambda: region_step(make(device), x, y, "aot_eager"), None),
        ("compile fwd+loss, backend=inductor",
         lambda: region_step(make(device), x, y, "inductor"), no_inductor),
        ("compile whole step (+ optimizer)", lambda: whole_step(make(device), x, y),
         no_inductor),
        ("whole step, mode=reduce-overhead",
         lambda: whole_step(make(device), x, y, mode="reduce-overhead"), gpu_only or no_inductor),
        ("whole step in one CUDA graph", lambda: captured_step(make(device), x, y), gpu_only),
    ]
    rows = []
    with tf32_matmuls(chosen.tf32 and cuda):
        for name, build, skipped in plan:
            row = measure(name, build, device, args, skipped)
            row["workload"] = workload
            rows.append(row)
            print_row(row, rows[0].get("ms"))
    return rows


def sweep(device, args, status, sizes) -> list[dict]:
    """The residual step at several batch sizes: eager, whole step compiled, whole-step graph
    (TF32 matmuls on a GPU, as the large-batch workload)."""
    cuda = device.type == "cuda"
    print(f"\nbatch sweep, residual workload{', TF32 matmuls' if cuda else ''} "
          "(ms / step, ! noisy, (host ms))")
    names = ["eager"] + (["compiled"] if status.ready else []) + (["CUDA graph"] if cuda else [])
    print(f"{'batch':>6}" + "".join(f"{name:>22}" for name in names))
    torch._dynamo.reset()
    counters.clear()
    model = residual_model(device)  # the eager rows' model; the graphs capture models of their own
    compiled = whole_step(residual_model(device), *batch(device, 512, sizes[0], dynamic=True)
                          ) if status.ready else None
    found = []
    with quiet_compile_warnings(), tf32_matmuls(cuda):
        for size in sizes:
            x, y = batch(device, 512, size, dynamic=True)  # one compilation for every size
            builds = {"eager": partial(eager_step, model, x, y)}
            if compiled is not None:
                compiled.inputs.update(x=x, y=y)
                builds["compiled"] = partial(lambda step: step, compiled)
            if cuda:
                builds["CUDA graph"] = partial(captured_step, residual_model(device), x, y)
            point = {"batch": size}
            for name, build in builds.items():
                point[name] = sweep_point(build, device, args)
            found.append(point)
            print(f"{size:>6}" + "".join(sweep_cell(point.get(n)) for n in names), flush=True)
    return found


def sweep_point(build, device, args) -> dict:
    try:
        step = build()
        for _ in range(3):
            step()                        # compiles (a symbolic batch) or records, untimed
        timed = timing.benchmark(step, device, min_run_time=args.min_run_time / 2)
        host = overhead.step_cost(step, device, calls=1, host_calls=10).host_s
    except Exception as error:  # noqa: BLE001 - one point's failure must not lose the others
        return {"failed": f"{type(error).__name__}: {(str(error).splitlines() or [''])[0]}"}
    return {"ms": timed.median_s * 1e3, "host_ms": host * 1e3, "noisy": timed.noisy}


def sweep_cell(point: dict | None) -> str:
    if not point or "failed" in point:
        return f"{'failed' if point else '-':>22}"
    return f"{point['ms']:>12.3f}{'!' if point['noisy'] else ' '}({point['host_ms']:7.3f})"


def print_row(row: dict, baseline_ms: float | None) -> None:
    name = f"  {row['row']:<38}"
    if "skipped" in row or "failed" in row:
        print(f"{name}" + (f"skipped: {row['skipped']}" if "skipped" in row
                           else f"FAILED: {row['failed']}"), flush=True)
        return
    speed_up = baseline_ms / row["ms"] if baseline_ms else float("nan")

    def count(value, digits=0):
        return f"{value:>9.{digits}f}" if value is not None else f"{'-':>9}"
    graph_note = ""
    if "reduce-overhead" in row["row"]:
        graph_note = (f"  cudagraph_skips={row['cudagraph_skips']}" +
                      ("" if row["cudagraph_skips"] == 0 else " NOT A GRAPH"))
    print(f"{name}{row['ms']:>9.3f}{'!' if row['noisy'] else ' '}{speed_up:>7.2f}x"
          f"{count(row['host_ms'], 3)}{count(row['operators'])}{count(row['launches'])}"
          f"{count(row['kernels'])}{row['first_call_s']:>8.1f}{graph_note}", flush=True)


def header(device) -> None:
    print(f"  {'':<38}{'ms/step':>10}{'vs eager':>8}{'host ms':>9}{'ops':>9}{'launches':>9}"
          f"{'kernels':>9}{'1st s':>8}")
    print("  (! marks a time timing.benchmark calls noisy; 1st s: the first call, compiling or "
          "capturing, not in the time" + ("" if device.type == "cuda" else
                                          "; launches and kernels: counted on CUDA only") + ")")


def summary(device, rows, points) -> dict:
    by = {(r["workload"], r["row"]): r for r in rows}

    def ratio(workload, row):
        base, other = by.get((workload, "eager, fused AdamW")), by.get((workload, row))
        if not base or not other or "ms" not in other or "ms" not in base:
            return None
        return round(base["ms"] / other["ms"], 3)
    return {
        "benchmark": "overhead",
        "device": str(device),
        "machine": report.describe_machine(device),
        "torch": torch.__version__,
        "rows": rows,
        "sweep": points,
        "speedups": {f"{workload}: {row} vs eager": ratio(workload, row)
                     for workload in WORKLOADS for row in (
                         "compile fwd+loss, backend=inductor", "compile whole step (+ optimizer)",
                         "whole step, mode=reduce-overhead", "whole step in one CUDA graph")},
        "goals": {  # issue 29, on a GPU
            "whole-step graph >= 2x eager, launch-bound (residual)":
                ratio("residual", "whole step in one CUDA graph"),
            "compiled whole step >= 1.3x eager, fusion-rich (residual, large batch)":
                ratio("residual, large batch", "compile whole step (+ optimizer)"),
        },
        "failed_rows": [f"{r['workload']}: {r['row']}" for r in rows if "failed" in r],
        "noisy_rows": [f"{r['workload']}: {r['row']}" for r in rows if r.get("noisy")],
        "cudagraph_skips": {f"{r['workload']}: {r['row']}": r["cudagraph_skips"]
                            for r in rows if "cudagraph_skips" in r
                            and "reduce-overhead" in r["row"]},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-run-time", type=float, default=None,
                        help="seconds of timing per row (default 0.5 on a GPU, 0.05 on a CPU)")
    parser.add_argument("--no-profile", dest="profile", action="store_false",
                        help="skip counting operators, launches and kernels (the profiler)")
    args = parser.parse_args()
    device = get_device()
    cuda = device.type == "cuda"
    if args.min_run_time is None:
        args.min_run_time = 0.5 if cuda else 0.05
    print("machine:", report.describe_machine(device), flush=True)
    status = overhead.inductor_status(device)
    print(status.reason)
    rows = []
    for workload, chosen in WORKLOADS.items():
        print(f"\n{workload}: {chosen.what}")
        header(device)
        rows += rows_for(workload, device, args, status)
    try:
        points = sweep(device, args, status, SWEEP_CUDA if cuda else SWEEP_CPU)
    except Exception as error:  # noqa: BLE001 - the rows above must still reach the summary
        print(f"batch sweep FAILED: {type(error).__name__}: {error}")
        points = []
    print("\n" + json.dumps(summary(device, rows, points), allow_nan=False, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
