"""Lesson 03's figures: synchronised vs unsynchronised timing, and the matmul sweep's crossover.

    .venv/bin/python benchmarks/timing.py [--device cuda] [--size 4096]

Prints, from one run, on the machine it names:

* the median time of ``a @ b`` measured without and with a synchronisation before the clock
  stops, and their ratio (about 1 on the CPU, where work has finished when the call returns);
* the matmul sweep: from which size on the accelerator stays faster than the CPU; without an
  accelerator, from which size all CPU threads stay faster than one.

Run it on an otherwise idle machine; it is a benchmark, not a test.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from course_utils import get_device, matmul, report, synchronize

SIZES = [16, 32, 64, 128, 256, 512, 1024, 2048]


def median_call(fn, device, *, sync: bool, warmup: int = 3, repeats: int = 20) -> float:
    """Median seconds per call, the clock stopped with or without synchronising ``device``."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        synchronize(device)  # each call starts on an idle device, either way
        start = time.perf_counter()
        fn()
        if sync:
            synchronize(device)
        times.append(time.perf_counter() - start)
    synchronize(device)
    return statistics.median(times)


def stays_faster_from(sizes, slow, fast):
    """The smallest size from which ``fast`` beats ``slow`` at every larger size, else None."""
    found = None
    for size, slow_time, fast_time in zip(sizes, slow, fast, strict=True):
        found = (found or size) if fast_time < slow_time else None
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default=None, help="default: course_utils.get_device()")
    parser.add_argument("--size", type=int, default=None,
                        help="matrix size for the sync ratio (default 1024 on the CPU, else 4096)")
    args = parser.parse_args()
    device = get_device(args.device)
    size = args.size or (1024 if device.type == "cpu" else 4096)
    print(f"machine: {report.describe_machine(device)}")

    a, b = (torch.randn(size, size, device=device) for _ in range(2))
    unsynced = median_call(lambda: a @ b, device, sync=False)
    synced = median_call(lambda: a @ b, device, sync=True)
    print(f"a @ b, {size} x {size} float32 on {device}, median of 20 calls after 3 warm-up calls:")
    print(f"  clock stopped without synchronising: {unsynced * 1e3:10.3f} ms")
    print(f"  clock stopped after synchronising:   {synced * 1e3:10.3f} ms")
    print(f"  synchronised / unsynchronised:       {synced / unsynced:10.2f}x")
    if device.type == "cpu":
        print("  (the CPU computes before returning, so synchronising changes nothing here and the "
              "ratio is noise;\n   on a GPU the unsynchronised clock measures only the queuing)")

    sizes = SIZES if device.type != "cpu" else SIZES[:-1]
    cpu = [p.seconds for p in matmul.matmul_sweep(sizes, "cpu")]
    print(f"matmul sweep, n = {sizes[0]} to {sizes[-1]}, float32, median per size:")
    if device.type != "cpu":
        accelerator = [p.seconds for p in matmul.matmul_sweep(sizes, device)]
        found = stays_faster_from(sizes, cpu, accelerator)
        print(f"  {device} stays faster than the CPU ({torch.get_num_threads()} threads) from "
              f"n = {found}" if found else f"  {device} does not stay faster than the CPU")
        print(f"  at n = {sizes[-1]}: CPU {cpu[-1] * 1e3:.2f} ms, {device} "
              f"{accelerator[-1] * 1e3:.3f} ms, ratio {cpu[-1] / accelerator[-1]:.1f}x")
    else:
        print("  no accelerator found: comparing 1 CPU thread with all of them")
        one = [p.seconds for p in matmul.matmul_sweep(sizes, "cpu", threads=1)]
        found = stays_faster_from(sizes, one, cpu)
        threads = torch.get_num_threads()
        print(f"  {threads} threads stay faster than 1 from n = {found}" if found else
              f"  {threads} threads do not stay faster than 1 up to n = {sizes[-1]}")
        print(f"  at n = {sizes[-1]}: 1 thread {one[-1] * 1e3:.2f} ms, {threads} threads "
              f"{cpu[-1] * 1e3:.2f} ms, ratio {one[-1] / cpu[-1]:.2f}x")


if __name__ == "__main__":
    main()
