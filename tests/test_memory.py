"""course_utils.lab.memory: the formula, the measurements, the simulated budget and the finder."""
from __future__ import annotations

import gc
import itertools
import weakref

import pytest
import torch
from torch import nn

from course_utils import devices, memory


def mlp(widths=(8, 16, 16, 4)):
    layers = []
    for n_in, n_out in itertools.pairwise(widths):
        layers += [nn.Linear(n_in, n_out), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


# ------------------------------------------------------------------ the formula

def test_estimate_counts_parameters_gradients_adam_state_and_activations():
    model = mlp((8, 16, 4))  # 8*16 + 16 + 16*4 + 4 = 212 parameters
    estimate = memory.estimate_training_memory(model, batch_size=10, optimizer="adam")
    assert estimate.parameters == estimate.gradients == 212 * 4
    assert estimate.optimizer_state == 2 * 212 * 4
    assert estimate.activations == 10 * (8 + 16) * 4  # Linear inputs; ReLU output counted once
    assert estimate.total == 4 * 212 * 4 + 10 * 24 * 4


@pytest.mark.parametrize("optimizer, copies", [("sgd", 0), ("sgd_momentum", 1), ("adamw", 2)])
def test_estimate_optimizer_state_per_optimizer(optimizer, copies):
    estimate = memory.estimate_training_memory(mlp(), 4, optimizer)
    assert estimate.optimizer_state == copies * estimate.parameters


def test_estimate_ignores_frozen_parameters_for_gradients():
    model = mlp((8, 16, 4))
    model[0].requires_grad_(False)
    estimate = memory.estimate_training_memory(model, 1, "adam")
    assert estimate.parameters == 212 * 4 and estimate.gradients == (16 * 4 + 4) * 4


def test_estimate_matches_what_autograd_saves():
    torch.manual_seed(0)
    model = mlp((8, 32, 32, 4))
    inputs = torch.randn(64, 8)
    _, saved = memory.saved_for_backward(lambda: model(inputs), model.parameters())
    assert memory.estimate_training_memory(model, 64).activations == saved.activation_bytes


@pytest.mark.parametrize("arguments, error, words", [
    ((mlp(), 0), ValueError, "batch_size must be a positive whole number, got 0"),
    ((mlp(), 2.5), ValueError, "got 2.5"),
    ((mlp(), 2, "rmsprop"), ValueError, "optimizer must be one of ['adam', 'adamw', 'sgd', "),
    (("model", 2), TypeError, "needs an nn.Module, got str"),
    ((nn.Sequential(nn.Linear(2, 2), nn.GELU()), 2), TypeError, "not GELU; measure other"),
    ((nn.Sequential(nn.ReLU()), 2), ValueError, "has no parameters"),
])
def test_estimate_bad_inputs_are_named(arguments, error, words):
    with pytest.raises(error) as raised:
        memory.estimate_training_memory(*arguments)
    assert words in str(raised.value)


def test_memory_table_lists_each_part_per_column():
    estimate = memory.TrainingMemory(2**20, 2**20, 2 * 2**20, 3 * 2**20)
    table = memory.memory_table({"formula": estimate, "measured": estimate})
    assert table.splitlines()[0].split() == ["formula", "measured"]
    assert "optimizer state       2.00 MiB      2.00 MiB" in table
    assert table.splitlines()[-1].split() == ["total", "7.00", "MiB", "7.00", "MiB"]


# ------------------------------------------------------------------ saved for backward

def test_saved_for_backward_counts_shared_storage_once_and_parameters_apart():
    model = mlp((8, 16, 4))
    inputs = torch.randn(5, 8)
    output, saved = memory.saved_for_backward(lambda: model(inputs), model.parameters())
    assert isinstance(output, torch.Tensor) and output.grad_fn is not None
    assert saved.activation_bytes == 5 * (8 + 16) * 4
    # The second weight, needed for the gradient of that layer's input; the first layer's
    # input (the data) needs no gradient, so its weight is not saved.
    assert saved.parameter_bytes == 16 * 4 * 4
    assert saved.count == 3


def test_saved_for_backward_without_parameters_counts_everything_as_activations():
    model = mlp((8, 16, 4))
    _, saved = memory.saved_for_backward(lambda: model(torch.randn(5, 8)))
    assert saved.parameter_bytes == 0 and saved.activation_bytes == (5 * 24 + 16 * 4) * 4


def test_saved_for_backward_sees_less_with_checkpointing():
    from torch.utils.checkpoint import checkpoint

    model = nn.Sequential(*[layer for _ in range(4) for layer in (nn.Linear(32, 32), nn.GELU())])
    inputs = torch.randn(16, 32)
    _, plain = memory.saved_for_backward(lambda: model(inputs), model.parameters())
    _, checkpointed = memory.saved_for_backward(
        lambda: checkpoint(model, inputs, use_reentrant=False), model.parameters())
    assert checkpointed.activation_bytes == 16 * 32 * 4  # the segment's input only
    assert plain.activation_bytes == 8 * 16 * 32 * 4


def test_saved_for_backward_needs_a_function():
    with pytest.raises(TypeError, match="needs a function to call, got Tensor"):
        memory.saved_for_backward(torch.zeros(2))


# ------------------------------------------------------------------ accelerator readings

@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_accelerator_memory_refuses_devices_without_an_allocator(device):
    with pytest.raises(ValueError, match=f"accelerator_memory: device '{device}' has no caching "
                                         "allocator"):
        memory.accelerator_memory(device)
    with pytest.raises(ValueError, match=f"reset_peak: device '{device}' has no caching "
                                         "allocator.*saved_for_backward"):
        memory.reset_peak(device)


def test_accelerator_memory_names_a_missing_device():
    with pytest.raises(ValueError, match="'gpu'"):
        memory.accelerator_memory("gpu")


def test_release_cached_memory_on_the_cpu_collects_garbage():
    class Cycle:
        pass

    first, second = Cycle(), Cycle()
    first.other, second.other = second, first
    alive = weakref.ref(first)
    del first, second
    memory.release_cached_memory("cpu")
    assert alive() is None
    memory.release_cached_memory()  # no device: garbage only


def pretend_accelerator(monkeypatch, kind, api_raises=False):
    """torch answers as if this machine had accelerator ``kind``; returns the calls made."""
    calls = []
    monkeypatch.setattr(devices, "checked_device", lambda device, source: torch.device(device))
    monkeypatch.setattr(torch.accelerator, "current_accelerator",
                        lambda check_available=False: torch.device(kind))
    monkeypatch.setattr(torch.accelerator, "current_device_index", lambda: 0)

    def answer(name, value):
        def function(*args):
            calls.append((name, args))
            if api_raises and name.startswith("torch.accelerator"):
                raise RuntimeError(f"{kind} does not report this")
            return value
        return function

    for name, value in [("memory_allocated", 3), ("memory_reserved", 5),
                        ("max_memory_allocated", 4), ("reset_peak_memory_stats", None)]:
        monkeypatch.setattr(torch.accelerator, name, answer(f"torch.accelerator.{name}", value))
    monkeypatch.setattr(torch.mps, "current_allocated_memory", answer("mps.allocated", 7))
    monkeypatch.setattr(torch.mps, "driver_allocated_memory", answer("mps.driver", 9))
    return calls


def test_accelerator_memory_reads_torch_accelerator(monkeypatch):
    calls = pretend_accelerator(monkeypatch, "cuda")
    assert memory.accelerator_memory("cuda:1") == memory.MemoryReading("cuda:1", 3, 5, 4)
    assert calls[0] == ("torch.accelerator.memory_allocated", (1,))  # the index asked for
    memory.reset_peak("cuda")
    assert calls[-1] == ("torch.accelerator.reset_peak_memory_stats", (0,))


def test_accelerator_memory_falls_back_when_the_backend_does_not_report(monkeypatch):
    pretend_accelerator(monkeypatch, "mps", api_raises=True)
    assert memory.accelerator_memory("mps") == memory.MemoryReading("mps", 7, 9, None)
    memory.reset_peak("mps")  # nothing to reset: no error


@pytest.mark.gpu
def test_accelerator_readings_follow_a_tensor_on_the_gpu():
    device = torch.device("cuda")
    memory.release_cached_memory(device)
    before = memory.accelerator_memory(device)
    memory.reset_peak(device)
    block = torch.empty(64 * 2**20, dtype=torch.uint8, device=device)
    held = memory.accelerator_memory(device)
    assert held.allocated - before.allocated >= 64 * 2**20
    assert held.reserved >= held.allocated and held.peak_allocated >= held.allocated
    del block
    freed = memory.accelerator_memory(device)
    assert freed.allocated == before.allocated and freed.reserved >= held.allocated - 2**20
    memory.release_cached_memory(device)
    assert memory.accelerator_memory(device).reserved < freed.reserved


@pytest.mark.gpu
def test_find_batch_size_with_a_real_out_of_memory_error():
    device = torch.device("cuda")
    free, _ = torch.cuda.mem_get_info(device)

    def step(batch_size):
        torch.empty(batch_size * 2**20, dtype=torch.uint8, device=device)

    start = 2 ** (free // 2**20).bit_length()  # MiB: more than the GPU has free
    search = memory.find_batch_size(step, start, device=device)
    assert search.attempts[0] == memory.Attempt(start, False)
    assert search.batch_size <= free // 2**20 and search.attempts[-1].fitted


# ------------------------------------------------------------------ the simulated budget

def training_step(model, batch_size):
    inputs = torch.randn(batch_size, 8)
    model(inputs).square().mean().backward()


def test_budget_raises_a_real_out_of_memory_error_past_its_limit():
    model = mlp((8, 256, 4))
    with memory.SimulatedBudget(limit=2**20) as budget:
        training_step(model, 16)  # fits
        with pytest.raises(torch.OutOfMemoryError, match=r"of a budget of 1\.00 MiB"):
            training_step(model, 4096)
    assert budget.peak > 2**20


def test_budget_frees_what_is_no_longer_referenced():
    with memory.SimulatedBudget(limit=10 * 2**20) as budget:
        kept = torch.ones(2**20, dtype=torch.uint8)
        view = kept[:10]
        for _ in range(30):  # 30 MiB made in all, 2 MiB at a time: never over the limit
            torch.ones(2 * 2**20, dtype=torch.uint8)
        assert budget.used == 2**20
        del kept
        assert budget.used == 2**20  # the view still holds the storage
        del view
        assert budget.used == 0


def test_budget_rejects_a_bad_limit():
    with pytest.raises(ValueError, 
                       match=r"limit \(bytes\) must be a whole number of at least 0, got -1"):
        memory.SimulatedBudget(-1)


# ------------------------------------------------------------------ the batch-size finder

def limited_step(limit, calls):
    def step(batch_size):
        calls.append(batch_size)
        if batch_size > limit:
            raise torch.OutOfMemoryError(f"batch {batch_size} does not fit")
    return step


def test_find_batch_size_halves_until_a_step_fits():
    calls = []
    search = memory.find_batch_size(limited_step(100, calls), 1000)
    assert calls == [1000, 500, 250, 125, 62]
    assert search.batch_size == 62
    assert search.attempts == (memory.Attempt(1000, False), memory.Attempt(500, False),
                               memory.Attempt(250, False), memory.Attempt(125, False),
                               memory.Attempt(62, True))


def test_find_batch_size_reraises_when_nothing_fits():
    calls = []
    with pytest.raises(torch.OutOfMemoryError, match="batch 1 does not fit"):
        memory.find_batch_size(limited_step(0, calls), 8)
    assert calls == [8, 4, 2, 1]
    with pytest.raises(torch.OutOfMemoryError, match="batch 4 does not fit"):
        memory.find_batch_size(limited_step(0, []), 8, minimum=3)


def test_find_batch_size_lets_other_errors_through():
    def step(batch_size):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        memory.find_batch_size(step, 64)


def test_find_batch_size_retries_with_the_failed_step_released():
    """The failed step's tensors are gone (no traceback holds them) when the next step runs."""
    failed, alive_at_retry = [], []

    def step(batch_size):
        alive_at_retry.append(any(ref() is not None for ref in failed))
        activations = torch.empty(batch_size)
        if batch_size > 10:
            failed.append(weakref.ref(activations))
            raise torch.OutOfMemoryError("too big")

    assert memory.find_batch_size(step, 64).batch_size == 8
    assert alive_at_retry == [False] * 4


def test_find_batch_size_with_the_simulated_budget_on_a_real_model():
    model = mlp((8, 256, 4))
    with memory.SimulatedBudget(limit=2**20):
        search = memory.find_batch_size(lambda size: training_step(model, size), 4096)
    assert 1 <= search.batch_size < 4096 and [a.fitted for a in search.attempts][-1]
    gc.collect()
    with memory.SimulatedBudget(limit=2**20):
        training_step(model, search.batch_size)  # the size found fits again


@pytest.mark.parametrize("arguments, words", [
    ((lambda size: None, 0), "start must be a positive whole number, got 0"),
    ((lambda size: None, 8, None, 16), "minimum (16) must not be larger than start (8)"),
    ((lambda size: None, True), "start must be a positive whole number, got True"),
])
def test_find_batch_size_bad_inputs_are_named(arguments, words):
    with pytest.raises(ValueError) as raised:
        memory.find_batch_size(*arguments)
    assert words in str(raised.value)


def test_find_batch_size_needs_a_function():
    with pytest.raises(TypeError, match="step must be a function of the batch size, got int"):
        memory.find_batch_size(3, 8)


# ------------------------------------------------------------------ units

def test_mib():
    assert memory.mib(3 * 2**20 + 2**19) == "3.50 MiB"


def test_find_batch_size_releases_memory_between_attempts_only_with_a_device(monkeypatch):
    released = []
    monkeypatch.setattr(memory, "release_cached_memory", released.append)
    memory.find_batch_size(limited_step(100, []), 400)
    assert released == []
    memory.find_batch_size(limited_step(100, []), 400, device="cpu")
    assert released == ["cpu", "cpu"]  # after 400 and 200 ran out of memory
