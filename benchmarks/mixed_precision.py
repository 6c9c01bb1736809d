"""Mixed precision, measured: autocast against float32 on this machine, ratios from one run.

    .venv/bin/python benchmarks/mixed_precision.py [--repeats 15]

On this machine's device and under its policy (course_utils.lab.precision.amp_policy: bfloat16 on
the CPU and on GPUs with bfloat16 units, else float16 with a GradScaler) it prints:

* the speed-up (float32 time / autocast time) of one training step (precision.amp_step, Adam
  with lr=0, so that every step does the same work) of lesson 06's digits MLP (64-256-256-10,
  batch 64) and of a wider MLP (256-512-512-256, batch 256), each time the fastest of --repeats
  interleaved rounds;
* the speed-up of a square matmul in the reduced dtype, with a side that is a multiple of 8 and
  one that is not;
* the bytes autograd keeps for the backward pass (saved_tensors_hooks), autocast / float32, at
  batch 64 and 1024;
* the test accuracy of lesson 06's run (3 epochs on the digits, same seed).

A speed-up below 1 means autocast is slower. Run it on an otherwise idle machine; it is a
benchmark, not a test.
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch import nn

from course_utils import data, get_device, memory, precision, report, timing


def digits_mlp() -> nn.Sequential:
    return nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def wide_mlp() -> nn.Sequential:
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 256))


def machine_line(device: torch.device) -> str:
    return (f"{report.describe_machine(device)}; CPU capability "
            f"{torch.backends.cpu.get_cpu_capability()}")


def fastest_interleaved(runs: dict, device: torch.device, repeats: int) -> dict:
    """The fastest median time of each run, measured in alternating rounds."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for name, run in runs.items():
            best[name] = min(best[name],
                             timing.benchmark(run, device, min_run_time=0.05).median_s)
    return best


def step_runs(make_model, features, labels, policies: dict) -> dict:
    """One training step per policy, on the same batch each time.

    With lr=0 the weights stay put, so every step does the same work: a model that learned the
    batch would drift into tiny (subnormal) gradients, which are slow on x86 CPUs.
    """
    runs = {}
    for name, policy in policies.items():
        torch.manual_seed(0)
        model = make_model().to(features.device)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.0)
        scaler = policy.make_scaler()

        def step(model=model, optimizer=optimizer, scaler=scaler, policy=policy):
            precision.amp_step(model, features, labels, F.cross_entropy, optimizer, scaler,
                               policy)
        runs[name] = step
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=15, help="interleaved timing rounds")
    args = parser.parse_args()
    device = get_device()
    amp, full = precision.amp_policy(device), precision.amp_policy(device, enabled=False)
    policies = {"float32": full, "autocast": amp}
    print(machine_line(device))
    print(f"policy: autocast to {str(amp.dtype).removeprefix('torch.')}, GradScaler "
          f"{'on' if amp.use_scaler else 'off'} ({amp.reason})\n")

    generator = torch.Generator().manual_seed(0)
    print("time per training step (speed-up = float32 time / autocast time):")
    for name, make_model, batch, width, classes in [
            ("digits MLP, batch 64", digits_mlp, 64, 64, 10),
            ("wide MLP, batch 256", wide_mlp, 256, 256, 256)]:
        features = torch.randn(batch, width, generator=generator).to(device)
        labels = torch.randint(0, classes, (batch,), generator=generator).to(device)
        best = fastest_interleaved(step_runs(make_model, features, labels, policies), device,
                                   args.repeats)
        print(f"  {name:<22} float32 {best['float32'] * 1e3:8.2f} ms   autocast "
              f"{best['autocast'] * 1e3:8.2f} ms   speed-up "
              f"{best['float32'] / best['autocast']:.2f}x")

    side = 4096 if device.type != "cpu" else 256
    print(f"\ntime per square matmul (float32 vs {str(amp.dtype).removeprefix('torch.')}):")
    for n in (side, side - 1):
        a = torch.randn(n, n, generator=generator).to(device)
        b = torch.randn(n, n, generator=generator).to(device)
        a16, b16 = a.to(amp.dtype), b.to(amp.dtype)
        best = fastest_interleaved({"float32": lambda a=a, b=b: a @ b,
                                    "reduced": lambda a=a16, b=b16: a @ b}, device, args.repeats)
        print(f"  n = {n:<5} float32 {best['float32'] * 1e3:8.2f} ms   reduced "
              f"{best['reduced'] * 1e3:8.2f} ms   "
              f"speed-up {best['float32'] / best['reduced']:.2f}x")

    X_train, y_train, X_test, y_test = data.digits_tensors(device=device)
    print("\nbytes kept for backward, digits MLP (autocast / float32):")
    torch.manual_seed(0)
    model = digits_mlp().to(device)
    for batch in (64, 1024):
        kept = {}
        for name, policy in policies.items():
            with policy.autocast():
                inputs = X_train[:batch].clone()  # a slice (a view) would hold all of X_train
                _, saved = memory.saved_for_backward(
                    lambda inputs=inputs, batch=batch: F.cross_entropy(model(inputs),
                                                                       y_train[:batch]),
                    exclude=model.parameters())
                kept[name] = saved.activation_bytes
        print(f"  batch {batch:<5} float32 {kept['float32'] / 2**10:7.0f} KiB   autocast "
              f"{kept['autocast'] / 2**10:7.0f} KiB   "
              f"ratio {kept['autocast'] / kept['float32']:.2f}")

    train = data.TensorBatches(X_train, y_train, batch_size=64, shuffle=True, seed=0)
    test = data.TensorBatches(X_test, y_test, batch_size=512)
    comparison = precision.Comparison(
        precision.measure_training(digits_mlp, train, test, full, epochs=3, lr=3e-3),
        precision.measure_training(digits_mlp, train, test, amp, epochs=3, lr=3e-3))
    print("\nlesson 06's run (3 epochs on the digits, same seed):")
    print("  " + comparison.table().replace("\n", "\n  "))
    print(f"  test accuracy: float32 {comparison.baseline.test_accuracy:.1%}, autocast "
          f"{comparison.amp.test_accuracy:.1%} ({comparison.accuracy_change:+.1%})")


if __name__ == "__main__":
    main()
