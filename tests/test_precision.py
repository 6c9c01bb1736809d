"""course_utils.lab.precision: the policy, the step, the formats, the measurements (CPU paths)."""
from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch import nn

from course_utils import backends, data, memory, precision
from course_utils.checks import machines
from course_utils.probe import SimulatedMachine

T4 = machines.machine("a cloud VM with one Tesla T4", {"cuda": ["T4"]})


def tiny_mlp():
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


@pytest.fixture(scope="module")
def digits():
    X_train, y_train, X_test, y_test = data.digits_tensors()
    return (data.TensorBatches(X_train[:256], y_train[:256], batch_size=64, shuffle=True),
            data.TensorBatches(X_test, y_test, batch_size=512))


# ------------------------------------------------------------------ amp_policy

def test_cpu_policy_is_bfloat16_without_a_scaler():
    policy = precision.amp_policy("cpu")
    assert (policy.device, policy.dtype, policy.use_scaler) == (torch.device("cpu"),
                                                                torch.bfloat16, False)
    assert policy.enabled and "CPU" in policy.reason
    with policy.autocast():
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
    assert not policy.make_scaler().is_enabled()


def test_disabled_policy_is_the_float32_baseline():
    policy = precision.amp_policy("cpu", enabled=False)
    assert policy.dtype == torch.float32 and not policy.enabled and not policy.use_scaler
    with policy.autocast():
        assert not torch.is_autocast_enabled("cpu")
        assert nn.Linear(2, 2)(torch.ones(1, 2)).dtype == torch.float32


@pytest.mark.parametrize("spec, dtype, scaler", [
    (machines.CUDA, torch.bfloat16, False), (T4, torch.float16, True)])
def test_cuda_policy_follows_native_bfloat16(spec, dtype, scaler):
    """A T4 reports emulated bfloat16 as supported; the policy asks for native units."""
    with SimulatedMachine(spec) as machine:
        policy = precision.amp_policy("cuda")
    assert (policy.dtype, policy.use_scaler) == (dtype, scaler)
    assert "torch.cuda.get_device_capability" in machine.queries


@pytest.mark.parametrize("holds_bf16, dtype", [(True, torch.bfloat16), (False, torch.float16)])
def test_mps_policy_depends_on_bfloat16_support(monkeypatch, holds_bf16, dtype):
    mps = dataclasses.replace(backends.BACKENDS["mps"], native_bf16=lambda device: holds_bf16)
    monkeypatch.setitem(backends.BACKENDS, "mps", mps)
    with SimulatedMachine(machines.MPS):
        policy = precision.amp_policy("mps")
    assert policy.dtype == dtype and policy.use_scaler is not holds_bf16


def test_mps_without_the_backend_holds_no_bfloat16():
    assert backends.MPS.native_bf16(torch.device("mps")) is torch.backends.mps.is_available()


@pytest.mark.parametrize("spec, dtype, scaler", [
    (machines.XPU, torch.bfloat16, False),
    (machines.machine("an Intel Arc box", {"xpu": ["Arc A770"]}), torch.float16, True)])
def test_xpu_policy_follows_what_torch_xpu_reports(spec, dtype, scaler):
    """An XPU, a type the backend table does not name, gets a policy (it was refused)."""
    with SimulatedMachine(spec) as machine:
        policy = precision.amp_policy()
    assert policy.device == torch.device("xpu", 0)
    assert (policy.dtype, policy.use_scaler) == (dtype, scaler)
    assert "torch.xpu.is_bf16_supported" in machine.queries


@pytest.mark.parametrize("device, error, message", [
    ("gpu", ValueError, "'gpu', which is not a device name"),
    ("meta", ValueError, "no mixed-precision policy for device 'meta', which holds shapes"),
    (3, TypeError, r"amp_policy: device must be .* got 3\."),
])
def test_amp_policy_rejects_devices_it_cannot_serve(device, error, message):
    with pytest.raises(error, match=message):
        precision.amp_policy(device)


def test_amp_policy_rejects_a_non_bool_enabled():
    with pytest.raises(TypeError, match="enabled must be True or False, got 'yes'"):
        precision.amp_policy("cpu", enabled="yes")


def test_amp_policy_defaults_to_get_device():
    # No accelerator on the test machine.
    assert precision.amp_policy().device == torch.device("cpu")


# ------------------------------------------------------------------ amp_step

def step_setup(seed=0):
    torch.manual_seed(seed)
    model = tiny_mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    features, labels = torch.randn(16, 64), torch.randint(0, 10, (16,))
    return model, optimizer, features, labels


def test_amp_step_bfloat16_matches_a_float32_step():
    model, optimizer, features, labels = step_setup()
    twin, twin_optimizer, _, _ = step_setup()
    policy = precision.amp_policy("cpu")
    loss = precision.amp_step(model, features, labels, nn.functional.cross_entropy, optimizer,
                              policy.make_scaler(), policy)
    twin_optimizer.zero_grad()
    expected = nn.functional.cross_entropy(twin(features), labels)
    expected.backward()
    twin_optimizer.step()
    assert isinstance(loss, float) and loss == pytest.approx(expected.item(), rel=0.02)
    start = step_setup()[0]
    for mine, reference, initial in zip(model.parameters(), twin.parameters(),
                                        start.parameters(), strict=True):
        assert mine.dtype == torch.float32  # the weights stay float32
        update = (reference - initial).norm()
        assert (mine - reference).norm() < 0.25 * update  # bfloat16 rounding moves it a little


def test_amp_step_clips_the_unscaled_gradients():
    model, optimizer, features, labels = step_setup()
    before = [p.detach().clone() for p in model.parameters()]
    policy = precision.AmpPolicy("cpu", torch.float16, True, "test")
    precision.amp_step(model, features, labels, nn.functional.cross_entropy, optimizer,
                       policy.make_scaler(), policy, max_norm=0.01)
    moved = math.sqrt(sum(((p - b) ** 2).sum().item()
                          for p, b in zip(model.parameters(), before, strict=True)))
    assert moved == pytest.approx(0.1 * 0.01, rel=1e-2)  # lr × max_norm, not lr × max_norm / scale


def test_amp_step_skips_a_step_whose_float16_gradients_overflow():
    model, optimizer, features, labels = step_setup()
    before = [p.detach().clone() for p in model.parameters()]
    policy = precision.AmpPolicy("cpu", torch.float16, True, "test")
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**40)
    precision.amp_step(model, features, labels, nn.functional.cross_entropy, optimizer, scaler,
                       policy)
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))
    assert scaler.get_scale() == 2.0**39


# ------------------------------------------------------------------ number formats

@pytest.mark.parametrize("dtype, exponent, mantissa", [
    (torch.float32, 8, 23), (torch.float16, 5, 10), (torch.bfloat16, 8, 7),
    (torch.float64, 11, 52)])
def test_number_format_bits_and_range(dtype, exponent, mantissa):
    fmt = precision.NumberFormat.of(dtype)
    info = torch.finfo(dtype)
    assert (fmt.bits, fmt.exponent_bits, fmt.mantissa_bits) == (info.bits, exponent, mantissa)
    assert (fmt.eps, fmt.max, fmt.smallest_normal) == (info.eps, info.max, info.smallest_normal)
    assert fmt.smallest_subnormal == 2.0 ** (math.log2(info.smallest_normal) - mantissa)
    assert torch.tensor(fmt.smallest_subnormal, dtype=dtype).item() > 0
    assert torch.tensor(fmt.smallest_subnormal / 2.01, dtype=dtype).item() == 0


def test_number_formats_keeps_the_order_given():
    names = [f.name for f in precision.number_formats([torch.bfloat16, torch.float32])]
    assert names == ["bfloat16", "float32"]
    assert [f.name for f in precision.number_formats()] == ["float32", "float16", "bfloat16"]


@pytest.mark.parametrize("bad, error, message", [
    (torch.int64, ValueError, "floating-point dtype such as torch.float16, got torch.int64"),
    ("float16", TypeError, "needs a torch dtype such as torch.float16, got str 'float16'"),
])
def test_number_format_rejects_what_is_not_a_float_dtype(bad, error, message):
    with pytest.raises(error, match=message):
        precision.NumberFormat.of(bad)


def test_round_to_tf32_rounds_to_nearest_ties_to_even():
    values = torch.tensor([1.0, 1 + 2**-11, 1 + 3 * 2**-11, 1 + 2**-10 + 2**-12,
                           -(1 + 3 * 2**-11), 3.0e-39])
    rounded = precision.round_to_tf32(values)
    assert rounded.tolist()[:5] == [1.0, 1.0, 1 + 2**-9, 1 + 2**-10, -(1 + 2**-9)]
    assert rounded.dtype == torch.float32
    assert (rounded.view(torch.int32) & 0x1FFF).eq(0).all()  # only 10 mantissa bits left


def test_round_to_tf32_error_is_within_half_a_tf32_step_and_keeps_specials():
    values = torch.randn(10_000) * 1e3
    relative = ((precision.round_to_tf32(values) - values) / values).abs().max().item()
    assert relative <= 2**-11
    specials = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0])
    out = precision.round_to_tf32(specials)
    assert out[:2].tolist() == [float("inf"), float("-inf")] and out[2].isnan() and out[3] == 0


@pytest.mark.parametrize("bad, error, message", [
    (torch.ones(2, dtype=torch.float64), ValueError, "float32 tensor, got torch.float64"),
    ([1.0, 2.0], TypeError, "float32 tensor, got list"),
])
def test_round_to_tf32_rejects_other_inputs(bad, error, message):
    with pytest.raises(error, match=message):
        precision.round_to_tf32(bad)


# ------------------------------------------------------------------ measuring

def test_saved_activations_halve_under_autocast():
    model, batch = tiny_mlp(), torch.randn(2048, 64)
    _, full = memory.saved_for_backward(lambda: model(batch), exclude=model.parameters())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, half = memory.saved_for_backward(lambda: model(batch), exclude=model.parameters())
    assert 0.4 < half.activation_bytes / full.activation_bytes < 0.6


def test_measure_training_reports_a_typed_record(digits):
    train, test = digits
    run = precision.measure_training(tiny_mlp, train, test, precision.amp_policy("cpu"), epochs=3,
                                     lr=3e-2)
    assert isinstance(run, precision.RunMeasurement)
    assert (run.label, run.device, run.dtype, run.steps) == ("autocast bfloat16",
                                                             torch.device("cpu"), "bfloat16", 12)
    assert run.seconds_per_step > 0 and run.saved_bytes > 0 and run.peak_bytes is None
    assert 0.5 < run.test_accuracy <= 1 and math.isfinite(run.final_loss)
    assert run.skipped_steps == 0


def test_measure_training_counts_skipped_float16_steps(digits, monkeypatch):
    train, test = digits
    policy = precision.AmpPolicy("cpu", torch.float16, True, "test")
    monkeypatch.setattr(precision.AmpPolicy, "make_scaler",
                        lambda self: torch.amp.GradScaler("cpu", init_scale=2.0**40))
    run = precision.measure_training(tiny_mlp, train, test, policy, epochs=1, label="fp16")
    assert run.label == "fp16" and run.skipped_steps >= 1


def test_measure_training_rejects_bad_arguments(digits):
    train, test = digits
    with pytest.raises(TypeError, match="needs an AmpPolicy .* got str"):
        precision.measure_training(tiny_mlp, train, test, "bf16")
    with pytest.raises(ValueError, match="epochs must be a positive whole number, got 0"):
        precision.measure_training(tiny_mlp, train, test, precision.amp_policy("cpu"), epochs=0)


def test_peak_memory_is_none_where_the_device_cannot_tell(monkeypatch):
    assert precision._peak_memory(torch.device("cpu"), reset=False) is None

    def cannot_count(device=None):
        raise RuntimeError("this backend does not count memory")
    monkeypatch.setattr(torch.accelerator, "max_memory_allocated", cannot_count)
    assert precision._peak_memory(torch.device("mps"), reset=False) is None


def run_measurement(label, seconds, saved, accuracy):
    return precision.RunMeasurement(label, torch.device("cpu"), "float32", 10, seconds, saved,
                                    None, accuracy, 0.1, 0)


def test_comparison_ratios_and_table():
    comparison = precision.Comparison(run_measurement("float32", 0.02, 1000, 0.95),
                                      run_measurement("autocast bfloat16", 0.01, 600, 0.94))
    assert comparison.speedup == pytest.approx(2.0)
    assert comparison.saved_bytes_ratio == pytest.approx(0.6)
    assert comparison.accuracy_change == pytest.approx(-0.01)
    lines = comparison.table().splitlines()
    assert len(lines) == 3 and lines[1].startswith("float32") and "20.00" in lines[1]
    assert lines[2].startswith("autocast bfloat16") and "94.0%" in lines[2]


# ------------------------------------------------------------------ on a real GPU

@pytest.mark.gpu
def test_cuda_policy_matches_the_gpu():
    policy = precision.amp_policy("cuda")
    native = torch.cuda.get_device_capability()[0] >= 8
    assert policy.dtype == (torch.bfloat16 if native else torch.float16)
    assert policy.use_scaler is not native


@pytest.mark.gpu
def test_amp_step_on_cuda_keeps_float32_weights_and_learns(digits):
    train, test = digits
    policy = precision.amp_policy("cuda")
    baseline = precision.amp_policy("cuda", enabled=False)
    to_cuda = [data.TensorBatches(b.features.cuda(), b.labels.cuda(), b.batch_size)
               for b in (train, test)]
    amp = precision.measure_training(tiny_mlp, *to_cuda, policy, epochs=3, lr=1e-2)
    full = precision.measure_training(tiny_mlp, *to_cuda, baseline, epochs=3, lr=1e-2)
    assert amp.peak_bytes is not None and amp.peak_bytes > 0
    assert amp.test_accuracy > full.test_accuracy - 0.05


@pytest.mark.gpu
def test_round_to_tf32_models_a_tf32_matmul():
    if torch.cuda.get_device_capability()[0] < 8:
        pytest.skip("TF32 needs compute capability 8.0 or newer")
    a, b = torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 1024, device="cuda")
    exact = a.double() @ b.double()
    emulated = precision.round_to_tf32(a).double() @ precision.round_to_tf32(b).double()
    try:
        torch.set_float32_matmul_precision("high")
        real = (a @ b).double()
    finally:
        torch.set_float32_matmul_precision("highest")
    error = ((real - exact).norm() / exact.norm()).item()
    modelled = ((emulated - exact).norm() / exact.norm()).item()
    assert modelled / 3 < error < modelled * 3
