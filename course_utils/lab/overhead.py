"""Lesson 08's instruments: a graph-counting compile backend, what a step allocates, a trace's
summary, what one call of a step costs the host and launches on the device, and whether
``torch.compile``'s default backend can run here.

Nothing here compiles with Inductor: counting graphs needs only Dynamo, which is pure Python.
"""
from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .args import positive_int
from .backends import CompilerStatus, backend_for
from .devices import resolve, synchronize
from .report import quiet_profiler_markers

__all__ = ["GPU_SYNC_CALLS", "SYNC_OPS", "CompilerStatus", "GraphCounter", "StepCost",
           "TraceSummary", "inductor_status", "new_tensor_bytes", "step_cost", "summarize_trace"]

# The operator that copies a tensor's number to the host (.item(), float(), bool(), print): on
# a GPU, for a GPU tensor, the host waits there for the queue to empty.
SYNC_OPS = ("aten::_local_scalar_dense",)
GPU_SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
# Host calls that each put work on a CUDA stream: a kernel (runtime or driver API: cuBLAS, Triton),
# a whole graph, a copy or a fill. Counted per step by step_cost.
LAUNCH_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
                "cudaGraphLaunch", "cudaMemcpyAsync", "cudaMemsetAsync")


@dataclass
class GraphCounter:
    """A ``torch.compile`` backend that counts the graphs Dynamo hands it and runs them as they
    are (no Inductor, so it costs no compile time): ``torch.compile(fn, backend=counter)``."""

    graphs: int = 0
    ops_per_graph: list[int] = field(default_factory=list)

    def __call__(self, graph_module: torch.fx.GraphModule, example_inputs: list) -> Callable:
        self.graphs += 1
        self.ops_per_graph.append(sum(node.op.startswith("call_")  # function, method, module
                                      for node in graph_module.graph.nodes))
        return graph_module.forward


class _NewTensorBytes(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in _tensors((args, kwargs))}
        for tensor in _tensors(out):
            if tensor.untyped_storage().data_ptr() not in inputs:  # not an in-place result
                self.bytes += tensor.untyped_storage().nbytes()
        return out


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def new_tensor_bytes(fn: Callable[[], Any]) -> int:
    """Bytes of the new tensors (temporaries included) that ``fn()`` creates, on any device."""
    if not callable(fn):
        raise TypeError(f"new_tensor_bytes: fn must be a callable taking no arguments, got "
                        f"{type(fn).__name__}.")
    with _NewTensorBytes() as mode:
        fn()
    return mode.bytes


@dataclass(frozen=True)
class TraceSummary:
    """What a Chrome trace written by ``torch.profiler`` holds, counted."""

    operators: int  # PyTorch operators (cpu_op events)
    kernels: int  # device kernels (0 without a GPU)
    sync_points: dict[str, int]  # "operator (in 'range')" -> times: where the host read a value
    kernel_busy: float | None  # share of the kernels' span the device computed (None: no kernels)


def summarize_trace(path: str | Path) -> TraceSummary:
    """Count operators, kernels and host-device synchronisations in a trace file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no trace file at {str(path)!r}: pass the .json file that "
                                "export_chrome_trace or on_trace_ready wrote.")
    events = [e for e in json.loads(path.read_text()).get("traceEvents", [])
              if e.get("ph") == "X"]
    operators = [e for e in events if e.get("cat") == "cpu_op"]
    kernels = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "kernel")
    ranges = [(e["ts"], e["ts"] + e["dur"], e["name"]) for e in events  # record_function's
              if e.get("cat") == "user_annotation" and not e["name"].startswith("ProfilerStep")]

    def where(event) -> str:
        inside = [r for r in ranges if r[0] <= event["ts"] <= r[1]]
        innermost = min(inside, key=lambda r: r[1] - r[0], default=None)
        return f"in {innermost[2]!r}" if innermost else "outside your ranges"
    syncs = Counter(f"{e['name']} ({where(e)})" for e in events
                    if e["name"] in SYNC_OPS + GPU_SYNC_CALLS)
    busy = None
    if kernels:
        covered, end = 0.0, kernels[0][0]
        for start, stop in kernels:  # the union of the kernels' intervals
            covered += max(0.0, stop - max(start, end))
            end = max(end, stop)
        busy = covered / max(end - kernels[0][0], 1e-9)
    return TraceSummary(len(operators), len(kernels), dict(syncs), busy)


HOST_BUDGET_S = 0.25  # step_cost's host timing stops here, after at least 3 calls


@dataclass(frozen=True)
class StepCost:
    """What one call of a step costs the host, and what it asks of the device (per call)."""

    host_s: float  # median time until the call returns, the device's queue not waited for
    operators: float  # PyTorch operators called, not counting those an operator calls inside
    launches: float | None  # host calls that queue device work (LAUNCH_CALLS); None: no GPU
    kernels: float | None  # kernels, copies and fills the device ran; None: no GPU


def step_cost(step: Callable[[], Any], device: torch.device | str, *, calls: int = 3,
              host_calls: int = 20) -> StepCost:
    """Count what ``step()`` runs (a light profile of ``calls`` calls: no shapes, memory or
    stacks, whose recording would slow the host) and time how long the host needs to issue it.

    Host time: the median over ``host_calls`` calls (fewer, at least 3, once they took
    ``HOST_BUDGET_S`` together) of the time until ``step()`` returns, with the device
    synchronised before each call but not after, so that queued device work is not waited for
    (on the CPU, where nothing is queued, it is the step's whole time). Call ``step()`` a few
    times first: compiling or recording is not a step's cost.
    """
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    if not callable(step):
        raise TypeError(f"step_cost: step must be a callable taking no arguments, got "
                        f"{type(step).__name__}.")
    device = resolve(device, "step_cost")
    calls = positive_int(calls, "calls", "step_cost")
    host_calls = positive_int(host_calls, "host_calls", "step_cost")
    host = []
    for _ in range(host_calls):
        synchronize(device)
        started = time.perf_counter()
        step()
        host.append(time.perf_counter() - started)
        if len(host) >= 3 and sum(host) > HOST_BUDGET_S:  # a slow step: a few calls suffice
            break
    synchronize(device)
    gpu = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    with quiet_profiler_markers(), profile(activities=activities) as prof:
        for _ in range(calls):
            step()
        synchronize(device)
    operators = launches = kernels = 0
    for event in prof.events():
        if event.device_type == DeviceType.CUDA:
            kernels += 1
        elif event.name in LAUNCH_CALLS:
            launches += 1
        elif event.name.startswith("aten::") and not (
                event.cpu_parent and event.cpu_parent.name.startswith("aten::")):
            operators += 1  # called from Python, autograd or compiled code, not by an operator
    return StepCost(statistics.median(host), operators / calls,
                    launches / calls if gpu else None, kernels / calls if gpu else None)


def inductor_status(device: torch.device | str | None = None) -> CompilerStatus:
    """Whether ``torch.compile``'s default backend (Inductor) can generate code for ``device``
    (default :func:`~course_utils.lab.devices.get_device`): C++ through a compiler on the CPU,
    Triton on a GPU, Metal on MPS, as the device's backend says
    (:mod:`course_utils.lab.backends`). Asks, compiles nothing."""
    device = resolve(device, "inductor_status")
    return backend_for(device).compiler(device)
