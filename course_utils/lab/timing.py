"""Timing PyTorch work honestly, on the CPU and on an accelerator (lesson 03).

GPU kernels are queued and run later, and the first call on a device pays for start-up. A
timing is only honest when the work ran before the clock stopped, start-up was paid before the
clock started, and it was repeated enough to see the noise. The helpers:

* :func:`benchmark` -- the course's one timing primitive: a callable, timed with
  ``torch.utils.benchmark.Timer`` on a clock that synchronises ``device`` (warm-up, at least
  ``MIN_BLOCKS`` blocks, the median, the fastest block and the spread), as a :class:`Timing`
  that warns when the spread says the machine was busy;
* :class:`WorkQueue` -- a CPU stand-in for a GPU stream, to see asynchronous work without a GPU.

What a figure was measured on, and a quiet profiler, are in :mod:`course_utils.lab.report`; the
matrix-size sweep built on :func:`benchmark`, in :mod:`course_utils.lab.matmul`.

The lesson's exercises (a timer, a crossover finder) are the learner's to write; nothing here
computes a crossover.
"""
from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch
from torch.utils import benchmark as torch_benchmark

from .args import positive_int, seconds
from .devices import resolve, synchronize

__all__ = [
    "Timing",
    "WorkQueue",
    "benchmark",
    "synchronized_clock",
]


# ------------------------------------------------------------------ checks of arguments

def thread_count(threads, function: str) -> int:
    """None -> the threads PyTorch uses now; otherwise a positive whole number."""
    threads = positive_int(threads, "threads", function, none_means="all of PyTorch's threads")
    return torch.get_num_threads() if threads is None else threads


# ------------------------------------------------------------------ one timing

MIN_BLOCKS = 5  # a spread needs several blocks: one block has an IQR of 0, which says nothing
NOISY_SPREAD = 0.2  # an IQR above this share of the median: something else was using the machine
# The timing thread waited, ready to run, for a CPU during more than this share of the time:
# other programs had the cores, and that slows every call alike, which no spread can show.
NOISY_CPU_WAIT = 0.1
_SCHEDSTAT = "/proc/thread-self/schedstat"  # Linux: ns on a CPU, ns waiting for one, slices
SLOW_CALL_S = 1e-3  # from here on, each call is timed alone (a clock reading costs microseconds)


@dataclass(frozen=True)
class Timing:
    """What :func:`benchmark` measured: seconds per call, their spread, and where.

    The calls run in blocks (``calls_per_block`` each, chosen so that a block is long enough to
    read on the clock); every statistic is per call. ``median_s`` is the figure to report,
    ``min_s`` the least disturbed block (on a busy machine the closer to the truth), and
    ``iqr_s`` the spread of the middle half of the blocks. ``cpu_wait`` is the share of the
    measurement during which the timing thread was ready to run but waited for a CPU (Linux;
    None elsewhere). ``noisy`` says the median cannot be trusted: the spread is too large, or
    the thread waited so long for a CPU that every call may have been slowed alike.
    """

    label: str
    device: torch.device
    threads: int
    median_s: float
    min_s: float
    iqr_s: float
    blocks: int
    calls_per_block: int
    cpu_wait: float | None = None

    @property
    def calls(self) -> int:
        """How many calls were timed in all (warm-up excluded)."""
        return self.blocks * self.calls_per_block

    @property
    def spread(self) -> float:
        """The IQR as a share of the median: 0.05 is a quiet machine, 0.5 a busy one."""
        return self.iqr_s / self.median_s if self.median_s > 0 else 0.0

    @property
    def waited(self) -> bool:
        """Other programs kept the timing thread from a CPU long enough to slow every call."""
        return self.cpu_wait is not None and self.cpu_wait > NOISY_CPU_WAIT

    @property
    def noisy(self) -> bool:
        return self.spread > NOISY_SPREAD or self.waited

    def warning(self) -> str:
        """'' when the figure can be trusted; else why not, and what to do."""
        if not self.noisy:
            return ""
        if self.spread <= NOISY_SPREAD:  # a steady figure, but every call slowed alike
            return (f"NOISY: the timing waited for a CPU during {self.cpu_wait:.0%} of its run, "
                    "so other programs had the cores and every call may be slower alike (a "
                    "small spread cannot show that); re-run on a quiet machine before you "
                    "trust it.")
        waited = (f", and the timing waited for a CPU during {self.cpu_wait:.0%} of its run"
                  if self.waited else "")
        return (f"NOISY: the blocks spread over {self.spread:.0%} of the median{waited}, so "
                "something else was using the machine; the fastest block is the better guess, "
                "and the figure needs a re-run on a quiet machine before you trust it.")

    def __str__(self) -> str:
        text = (f"{self.label or 'fn()'} on {self.device} ({self.threads} thread(s)): "
                f"{self.median_s * 1e3:.4g} ms per call, median of {self.blocks} blocks of "
                f"{self.calls_per_block} (fastest {self.min_s * 1e3:.4g} ms, IQR "
                f"{self.iqr_s * 1e3:.2g} ms = {self.spread:.0%} of the median)")
        return text + (f"\n  {self.warning()}" if self.noisy else "")


def synchronized_clock(device=None) -> Callable[[], float]:
    """A clock for ``Timer(timer=...)``: waits for ``device``'s queued work (default
    :func:`get_device`), then reads the time.

    torch.utils.benchmark's default clock synchronises only the current accelerator (older
    PyTorch: only CUDA); this one synchronises the device that the timed work runs on.
    """
    device = resolve(device, "synchronized_clock")

    def clock() -> float:
        synchronize(device)
        return time.perf_counter()

    return clock


def _cpu_wait_s() -> float | None:
    """Seconds this thread has waited, ready to run, for a CPU (Linux); None where unknown."""
    try:
        with open(_SCHEDSTAT, encoding="ascii") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def _one_call(code, names: dict, clock: Callable[[], float]) -> float:
    started = clock()
    eval(code, names)  # the course's own statement: "fn()" or "a @ b"
    return clock() - started


def time_statement(stmt: str, names: dict, device: torch.device, label: str, threads: int,
                   min_run_time: float) -> Timing:
    """``stmt`` timed as :func:`benchmark` times a call (for helpers built on the timer, such as
    :func:`course_utils.lab.matmul.matmul_sweep`: a statement avoids a Python call per run)."""
    clock = synchronized_clock(device)
    timer = torch_benchmark.Timer(stmt=stmt, globals=names, timer=clock, num_threads=threads,
                                  label=label)
    code = compile(stmt, "<timed>", "eval")
    waited_before, started = _cpu_wait_s(), time.perf_counter()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        _one_call(code, names, clock)  # the warm-up: a first call pays for start-up
        first = _one_call(code, names, clock)  # a first look at the cost of a call
        if first >= SLOW_CALL_S:
            # A slow call: timed alone it is far above the clock's resolution, while
            # blocked_autorange would put up to 10 of them in each of its blocks.
            count = max(MIN_BLOCKS, math.ceil(min_run_time / first))
            per_block, times = 1, [_one_call(code, names, clock) for _ in range(count)]
    finally:
        torch.set_num_threads(before)
    if first < SLOW_CALL_S:
        # blocked_autorange chooses a block size (warming up again as it does) and repeats
        # blocks for min_run_time; a few more blocks where that gave too few for a spread.
        measurement = timer.blocked_autorange(min_run_time=min_run_time)
        per_block, blocks = measurement.number_per_run, [measurement]
        while sum(len(block.raw_times) for block in blocks) < MIN_BLOCKS:
            blocks.append(timer.timeit(per_block))
        times = [time_ for block in blocks for time_ in block.times]  # per call, per block
    waited_after, elapsed = _cpu_wait_s(), time.perf_counter() - started
    cpu_wait = (None if waited_before is None or waited_after is None
                else max(0.0, waited_after - waited_before) / max(elapsed, 1e-9))
    lower, median, upper = statistics.quantiles(times, n=4, method="inclusive")
    return Timing(label=label, device=device, threads=threads, median_s=median,
                  min_s=min(times), iqr_s=upper - lower, blocks=len(times),
                  calls_per_block=per_block, cpu_wait=cpu_wait)


def benchmark(fn: Callable[[], object], device=None, *, label: str = "",
              threads: int | None = None, min_run_time: float = 0.2) -> Timing:
    """Time ``fn()`` with ``torch.utils.benchmark.Timer`` and return a :class:`Timing`.

    The course's one timing primitive. The clock synchronises ``device`` (default
    :func:`get_device`) before every reading, so queued GPU work is counted; the Timer warms
    up first and repeats blocks of calls for at least ``min_run_time`` seconds, and at least
    ``MIN_BLOCKS`` blocks, so that the spread means something. ``threads`` (default: all
    PyTorch uses now) is the CPU thread count; the Timer's own default would be 1.
    """
    if not callable(fn):
        raise TypeError(f"benchmark: fn must be a callable taking no arguments, got "
                        f"{type(fn).__name__}.")
    return time_statement("fn()", {"fn": fn}, resolve(device, "benchmark"), label,
                    thread_count(threads, "benchmark"),
                    seconds(min_run_time, "min_run_time", "benchmark"))


# ------------------------------------------------------------------ asynchronous work on a CPU

class WorkQueue:
    """A CPU stand-in for a GPU stream: ``submit`` returns at once, the work runs later, in order.

    One worker thread runs the submitted callables one after the other, as a GPU runs the
    kernels queued on a stream; :meth:`synchronize` waits until all of them have finished (and
    re-raises the first error). PyTorch releases the GIL inside its operators, so the caller
    really goes on while the work runs. Use it in a ``with`` block, which ends the thread.
    """

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="work-queue")
        self._pending: list[Future] = []

    def submit(self, fn: Callable[[], object]) -> None:
        if not callable(fn):
            raise TypeError(f"WorkQueue.submit needs a callable, got {type(fn).__name__}.")
        self._pending.append(self._executor.submit(fn))

    @property
    def queued(self) -> int:
        """How many submitted callables have not finished yet."""
        return sum(not future.done() for future in self._pending)

    def synchronize(self) -> None:
        pending, self._pending = self._pending, []
        for future in pending:
            future.result()

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
