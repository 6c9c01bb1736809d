"""Lesson 04 checks: right answers pass, each typical mistake gets its own hint."""
from __future__ import annotations

import random
import statistics
import time
import timeit
from time import perf_counter_ns

import numpy as np
import pytest
import torch

from course_utils import checks, data, synchronize
from course_utils.checks.framework import run_probe
from course_utils.checks.lesson04.find_bottleneck import HIDDEN as HIDDEN_MACHINES

from .probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from .solutions import solution

find_bottleneck = solution("04_input_pipeline", "find_bottleneck")
DeviceBatches = solution("04_input_pipeline", "device_batches", "DeviceBatches")


# ------------------------------------------------------------------ find_bottleneck


def timed(loader, step, wait, clock=time.perf_counter, **fields):
    """(loader seconds, model seconds) per batch, with `wait(device_arg)` where the answer waits."""
    loads, steps = [], []
    asked = clock()
    for batch in loader:
        arrived = clock()
        wait("before")
        step(batch)
        wait("after")
        finished = clock()
        wait("late")
        loads.append(arrived - asked)
        steps.append(finished - arrived)
        asked = clock() if not fields.get("keep_asked") else arrived
    return loads, steps


def answer(*, where="after", device_of=lambda device: device, summarise=statistics.fmean,
           order=lambda culprit, loader, model: (culprit, loader, model), clock=time.perf_counter,
           decide=lambda loader, model: "loader" if loader > model else "model", **fields):
    """A find_bottleneck() built from its parts, so that each test changes one of them."""
    def find(loader, step, device):
        loads, steps = timed(loader, step, lambda moment: synchronize(device_of(device))
                             if moment == where else None, clock=clock, **fields)
        loader_s, model_s = summarise(loads), summarise(steps)
        return order(decide(loader_s, model_s), loader_s, model_s)
    return find


def find_bottleneck_with_next_and_accelerator(loader, step, device):
    """Right: iter/next by hand, torch.accelerator.synchronize for accelerators, time.time."""
    iterator, loads, steps = iter(loader), [], []
    while True:
        asked = time.time()
        try:
            batch = next(iterator)
        except StopIteration:
            break
        arrived = time.time()
        step(batch)
        if device.type != "cpu":
            torch.accelerator.synchronize(device)
        loads.append(arrived - asked)
        steps.append(time.time() - arrived)
    loader_s, model_s = sum(loads) / len(loads), sum(steps) / len(steps)
    return ("loader" if loader_s > model_s else "model"), loader_s, model_s


def find_bottleneck_with_cuda_sync(loader, step, device):
    """Wrong: torch.cuda.synchronize() on every machine."""
    loads, steps = [], []
    asked = time.perf_counter()
    for batch in loader:
        arrived = time.perf_counter()
        step(batch)
        torch.cuda.synchronize()
        loads.append(arrived - asked)
        steps.append(time.perf_counter() - arrived)
        asked = time.perf_counter()
    loader_s, model_s = statistics.fmean(loads), statistics.fmean(steps)
    return ("loader" if loader_s > model_s else "model"), loader_s, model_s


def find_bottleneck_as_dict(loader, step, device):
    culprit, loader_s, model_s = find_bottleneck(loader, step, device)
    return {"culprit": culprit, "loader": loader_s, "model": model_s}


def find_bottleneck_not_done(loader, step, device):
    raise NotImplementedError()


def find_bottleneck_with_ns_and_vendor_syncs(loader, step, device):
    """Right: `from time import perf_counter_ns`, each vendor's own wait, given the device."""
    loads, steps = [], []
    asked = perf_counter_ns()
    for batch in loader:
        arrived = perf_counter_ns()
        step(batch)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elif device.type == "mps":
            torch.mps.synchronize()
        finished = perf_counter_ns()
        loads.append((arrived - asked) / 1e9)
        steps.append((finished - arrived) / 1e9)
        asked = finished
    loader_s, model_s = statistics.fmean(loads), statistics.fmean(steps)
    return ("loader" if loader_s > model_s else "model"), loader_s, model_s


def find_bottleneck_subtracting(loader, step, device):
    """Right: time.monotonic, the loader's share as the whole loop minus the steps."""
    model_total, count = 0.0, 0
    begin = time.monotonic()
    for count, batch in enumerate(loader, start=1):  # noqa: B007 - count is used after
        started = time.monotonic()
        step(batch)
        synchronize(device)
        model_total += time.monotonic() - started
    loader_total = time.monotonic() - begin - model_total
    return ("loader" if loader_total > model_total else "model", loader_total / count,
            model_total / count)


RIGHT_FINDERS = [find_bottleneck, find_bottleneck_with_next_and_accelerator,
                 answer(summarise=statistics.median), answer(clock=timeit.default_timer),
                 answer(summarise=lambda values: statistics.fmean(values[1:])),  # skips one
                 find_bottleneck_with_ns_and_vendor_syncs, find_bottleneck_subtracting]


@pytest.mark.parametrize("finder", RIGHT_FINDERS)
def test_find_bottleneck_right_answers_keep_full_marks(finder, capsys):
    passes(checks.check_find_bottleneck, finder)
    printed = capsys.readouterr().out
    assert ("on: a Linux machine with one NVIDIA H100, device cuda (loader 1 ms, model 10 ms per "
            "batch); a laptop with no GPU, device cpu (loader 10 ms, model 1 ms per batch); a "
            "Linux machine with one NVIDIA H100, device cpu (loader 3 ms, model 1 ms per "
            "batch).") in printed
    assert "a Mac with Apple silicon (MPS), device mps" in printed  # the hidden part adds these
    assert "a server with two NVIDIA A100s, device cuda:1" in printed


def test_find_bottleneck_leaves_torch_and_the_clocks_unpatched():
    real = (torch.cuda.synchronize, torch.accelerator.synchronize, torch.mps.synchronize,
            torch.cuda.is_available, time.perf_counter, time.perf_counter_ns)
    checks.check_find_bottleneck(find_bottleneck_with_ns_and_vendor_syncs, hidden=True, seed=3)
    assert (torch.cuda.synchronize, torch.accelerator.synchronize, torch.mps.synchronize,
            torch.cuda.is_available, time.perf_counter, time.perf_counter_ns) == real
    assert perf_counter_ns is time.perf_counter_ns


def test_find_bottleneck_verdicts_do_not_depend_on_the_machine_load():
    """The stages cost simulated time: a busy machine cannot change what the check sees."""
    inputs = checks.check_find_bottleneck.make_inputs(1, True)
    first = run_probe(checks.check_find_bottleneck.probe, (find_bottleneck,), inputs)
    time.sleep(0.01)
    assert run_probe(checks.check_find_bottleneck.probe, (find_bottleneck,), inputs) == first


def on_the_h100(message):
    """The part of a failure message about the H100 with device 'cuda'."""
    return next(line for line in message.splitlines()
                if line.startswith("✘ cuda on a Linux machine with one NVIDIA H100:"))


def test_find_bottleneck_without_synchronising():
    message = failure(checks.check_find_bottleneck, answer(where=None))
    assert on_the_h100(message).startswith(
        "✘ cuda on a Linux machine with one NVIDIA H100: find_bottleneck() measured almost no "
        "time per step")
    assert "yet the device was busy 10 ms per step: it never waited for the device" in message
    assert "✔ passed: cpu on a laptop with no GPU; cpu on a Linux machine with one" in message
    assert "synchronize(device) from course_utils, with the function's `device` argument" \
        in message


def test_find_bottleneck_synchronising_the_notebooks_device():
    message = failure(checks.check_find_bottleneck,
                      answer(device_of=lambda device: torch.device("cpu")))
    assert "it never waited for the device it was given" in message
    assert "with the function's `device` argument" in message


def test_find_bottleneck_synchronising_before_the_step_only():
    """The wait for the previous step falls before the clock: the model looks free."""
    def finder(loader, step, device):
        loads, steps = [], []
        asked = time.perf_counter()
        for batch in loader:
            synchronize(device)
            arrived = time.perf_counter()
            step(batch)
            steps.append(time.perf_counter() - arrived)
            loads.append(arrived - asked)
            asked = time.perf_counter()
        loader_s, model_s = statistics.fmean(loads), statistics.fmean(steps)
        return ("loader" if loader_s > model_s else "model"), loader_s, model_s

    message = failure(checks.check_find_bottleneck, finder)
    assert "it waits for the device before each step, but not after it" in message


def test_find_bottleneck_synchronising_after_reading_the_clock():
    message = failure(checks.check_find_bottleneck, answer(where="late"))
    assert "it waits for the device only after reading the clock" in message


def test_find_bottleneck_with_cuda_synchronize_on_a_cpu():
    message = failure(checks.check_find_bottleneck, find_bottleneck_with_cuda_sync)
    assert "✘ cpu on a laptop with no GPU: find_bottleneck() called " \
        "torch.cuda.synchronize(), which raises RuntimeError for device 'cpu' on this " \
        "machine." in message
    assert "does nothing on the CPU (torch.cuda.synchronize() knows CUDA only" in message


def find_bottleneck_with_accelerator_if_available(loader, step, device):
    """Wrong on a GPU machine given the CPU: torch.accelerator.synchronize(cpu) raises."""
    def wait(moment):
        if moment == "after" and torch.accelerator.is_available():
            torch.accelerator.synchronize(device)
    loads, steps = timed(loader, step, wait, clock=time.perf_counter)
    loader_s, model_s = statistics.fmean(loads), statistics.fmean(steps)
    return ("loader" if loader_s > model_s else "model"), loader_s, model_s


def find_bottleneck_with_the_current_gpu(loader, step, device):
    """Wrong on the second GPU: torch.cuda.synchronize() waits for the current one, cuda:0."""
    def wait(moment):
        if moment == "after" and device.type == "cuda":
            torch.cuda.synchronize()
        elif moment == "after" and device.type == "mps":
            torch.mps.synchronize()
    loads, steps = timed(loader, step, wait, clock=time.perf_counter)
    loader_s, model_s = statistics.fmean(loads), statistics.fmean(steps)
    return ("loader" if loader_s > model_s else "model"), loader_s, model_s


def find_bottleneck_timing_the_step_in_cpu_time(loader, step, device):
    """Wrong: the step timed with time.process_time, which does not count waiting."""
    loads, steps = [], []
    asked = time.perf_counter()
    for batch in loader:
        arrived = time.perf_counter()
        started = time.process_time()
        step(batch)
        synchronize(device)
        steps.append(time.process_time() - started)
        loads.append(arrived - asked)
        asked = time.perf_counter()
    loader_s, model_s = statistics.fmean(loads), statistics.fmean(steps)
    return ("loader" if loader_s > model_s else "model"), loader_s, model_s


@pytest.mark.parametrize("finder, says, share", [
    (find_bottleneck_with_accelerator_if_available,
     ("✘ cpu on a Linux machine with one NVIDIA H100: find_bottleneck() called "
      "torch.accelerator.synchronize(), which raises ValueError for device 'cpu' on this "
      "machine."), 4 / 5),
    (find_bottleneck_with_the_current_gpu,
     ("✘ cuda:1 on a server with two NVIDIA A100s: find_bottleneck() measured almost no time "
      "per step, yet the device was busy longer per step: it waited for cuda:0, but the "
      "step's work runs on cuda:1: pass the function's `device`"), 4 / 5),
    (answer(clock=time.process_time),
     "find_bottleneck() never read a clock that the check follows", 0),
    (find_bottleneck_timing_the_step_in_cpu_time,
     ("it waited for the device, but the step time it reported does not span that wait"), 0),
    (answer(summarise=lambda values: 1e3 * statistics.fmean(values)),
     "find_bottleneck() reported the model time in milliseconds", 0),
], ids=["accelerator if available", "current GPU", "process_time", "step in CPU time", "ms"])
def test_find_bottleneck_device_and_clock_mistakes_in_the_hidden_part(finder, says, share):
    message = failure(checks.check_find_bottleneck, finder, hidden=True, seed=1)
    assert says in message
    assert graded(checks.check_find_bottleneck, (finder,), hidden=True, seed=1).fraction == \
        pytest.approx(share)


def test_find_bottleneck_device_mistakes_fail_the_visible_check_too():
    message = failure(checks.check_find_bottleneck, find_bottleneck_with_accelerator_if_available)
    assert "✘ cpu on a Linux machine with one NVIDIA H100: find_bottleneck() called " \
        "torch.accelerator.synchronize()" in message


def test_find_bottleneck_returning_totals():
    message = failure(checks.check_find_bottleneck, answer(summarise=sum))
    assert "reported the model time summed over 4 batches" in message
    assert "return means per batch" in message


@pytest.mark.parametrize("keep_asked", ["previous arrival", "start"])
def test_find_bottleneck_whose_loader_time_includes_the_step(keep_asked):
    def finder(loader, step, device):  # the loader's clock starts at the previous arrival
        loads, steps = [], []
        asked = time.perf_counter()
        for batch in loader:
            arrived = time.perf_counter()
            step(batch)
            synchronize(device)
            steps.append(time.perf_counter() - arrived)
            loads.append(arrived - asked)
            if keep_asked == "previous arrival":
                asked = arrived
            else:
                asked = time.perf_counter() - steps[-1]  # as if before the step
        loader_s, model_s = statistics.fmean(loads), statistics.fmean(steps)
        return ("loader" if loader_s > model_s else "model"), loader_s, model_s
    message = failure(checks.check_find_bottleneck, finder)
    assert "The loader time find_bottleneck() reported includes the step" in message
    assert "stop the loader's clock as soon as the batch arrives" in message


def test_find_bottleneck_returning_the_times_swapped():
    message = failure(checks.check_find_bottleneck,
                      answer(order=lambda culprit, loader, model: (culprit, model, loader)))
    assert "returned the model's time where the loader's belongs" in message
    assert "(culprit, loader_seconds, model_seconds), in this order" in message


@pytest.mark.parametrize("decide", [lambda loader, model: "loader",
                                    lambda loader, model: "model" if loader > model else "loader"])
def test_find_bottleneck_whose_culprit_contradicts_its_measurements(decide):
    message = failure(checks.check_find_bottleneck, answer(decide=decide))
    assert "as the bottleneck, but its own measurements say the" in message
    assert "took longer per batch" in message
    assert "return 'loader' or 'model': the stage that took longer per batch" in message


def test_find_bottleneck_with_another_name_for_the_culprit():
    message = failure(checks.check_find_bottleneck,
                      answer(decide=lambda loader, model: "GPU" if model > loader else "loader"))
    assert "named 'GPU' as the bottleneck, but its own measurements say the model took longer" \
        in message


def test_find_bottleneck_returning_a_dict():
    message = failure(checks.check_find_bottleneck, find_bottleneck_as_dict)
    assert "find_bottleneck() returned dict." in message
    assert "return a tuple (culprit, loader_seconds, model_seconds)" in message


def test_find_bottleneck_not_implemented():
    message = failure(checks.check_find_bottleneck, find_bottleneck_not_done)
    assert message.startswith("find_bottleneck() is not implemented yet")


def test_find_bottleneck_hidden_messages_do_not_reveal_the_costs():
    for seed in HIDDEN_SEEDS:
        message = failure(checks.check_find_bottleneck, answer(where=None), hidden=True,
                          seed=seed)
        assert "the device was busy longer" in message and " ms per step:" not in message
        totals = failure(checks.check_find_bottleneck, answer(summarise=sum), hidden=True,
                         seed=seed)
        assert "each took" not in totals and "summed over" in totals
    visible = failure(checks.check_find_bottleneck,
                      answer(summarise=lambda values: 3 * statistics.fmean(values)))
    assert "(each took 10 ms)" in visible


def test_find_bottleneck_hidden_cases_have_both_culprits():
    for seed in HIDDEN_SEEDS:
        cases = checks.check_find_bottleneck.make_inputs(seed, True)["cases"]
        culprits = {"loader" if c["loader_ms"] > c["model_ms"] else "model" for c in cases}
        assert culprits == {"loader", "model"}
        assert sorted((c["machine"]["name"], c["device"]) for c in cases) == sorted(
            (spec["name"], device) for spec, device in HIDDEN_MACHINES)


# ------------------------------------------------------------------ DeviceBatches

class WithTensorBatches:
    """Right: the course's TensorBatches does the work."""

    def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
        self.batches = data.TensorBatches(features, labels, batch_size, shuffle=True, seed=seed,
                                          drop_last=drop_last)

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        return iter(self.batches)


class SeededPerEpoch(DeviceBatches):
    """Right: a generator seeded with seed + epoch, as DistributedSampler.set_epoch does."""

    def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
        super().__init__(features, labels, batch_size, seed, drop_last)
        self.seed, self.epoch = seed, 0

    def __iter__(self):
        self.generator = torch.Generator().manual_seed(self.seed + self.epoch)
        self.epoch += 1
        return super().__iter__()


class PythonRandom(DeviceBatches):
    """Right: Python's random.Random, a list of positions as the index."""

    def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
        super().__init__(features, labels, batch_size, seed, drop_last)
        self.rng = random.Random(seed)

    def __iter__(self):
        order = list(range(len(self.labels)))
        self.rng.shuffle(order)
        for start in range(0, len(self) * self.batch_size if self.drop_last else len(order),
                           self.batch_size):
            index = order[start:start + self.batch_size]
            yield self.features[index], self.labels[index]


class NumpyGenerator(PythonRandom):
    """Right: a NumPy generator's permutation as the index."""

    def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
        super().__init__(features, labels, batch_size, seed, drop_last)
        self.rng = np.random.default_rng(seed)

    def __iter__(self):
        order = self.rng.permutation(len(self.labels))
        for start in range(0, len(self) * self.batch_size if self.drop_last else len(order),
                           self.batch_size):
            index = order[start:start + self.batch_size]
            yield self.features[index], self.labels[index]


class DeviceGenerator(DeviceBatches):
    """Right: the generator lives on the data's device (best practice on CUDA)."""

    def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
        super().__init__(features, labels, batch_size, seed, drop_last)
        self.generator = torch.Generator(device=features.device).manual_seed(seed)

    def __iter__(self):
        order = torch.randperm(len(self.labels), generator=self.generator,
                               device=self.features.device)
        stop = len(self) * self.batch_size if self.drop_last else len(order)
        for start in range(0, stop, self.batch_size):
            index = order[start:start + self.batch_size]
            yield self.features[index], self.labels[index]


class WithIndexSelect(DeviceBatches):
    """Right: index_select with the order moved to the data's device once per epoch."""

    def __iter__(self):
        order = torch.randperm(len(self.labels), generator=self.generator)
        order = order.to(self.features.device)
        for start in starts(self):
            index = order[start:start + self.batch_size]
            yield (torch.index_select(self.features, 0, index),
                   torch.index_select(self.labels, 0, index))


@pytest.mark.parametrize("batches", [DeviceBatches, WithTensorBatches, SeededPerEpoch,
                                     PythonRandom, NumpyGenerator, DeviceGenerator,
                                     WithIndexSelect],
                         ids=lambda c: c.__name__)
def test_device_batches_right_answers_keep_full_marks(batches, capsys):
    passes(checks.check_device_batches, batches)
    assert "tested with n=10, batch_size=4." in capsys.readouterr().out


def with_iter(body):
    """DeviceBatches whose __iter__ is replaced by `body(self)`."""
    return type(body.__name__, (DeviceBatches,), {"__iter__": body})


def starts(self):
    """The start of each batch, as the model answer cuts them (drop_last honoured)."""
    end = len(self) * self.batch_size if self.drop_last else len(self.labels)
    return range(0, end, self.batch_size)


def two_orders(self):
    features_order = torch.randperm(len(self.labels), generator=self.generator)
    labels_order = torch.randperm(len(self.labels), generator=self.generator)
    for start in starts(self):
        yield (self.features[features_order[start:start + self.batch_size]],
               self.labels[labels_order[start:start + self.batch_size]])


def with_replacement(self):
    for _ in range(len(self)):
        index = torch.randint(len(self.labels), (self.batch_size,), generator=self.generator)
        yield self.features[index], self.labels[index]


def always_drops_the_last(self):
    order = torch.randperm(len(self.labels), generator=self.generator)
    for start in range(0, len(self.labels) - self.batch_size + 1, self.batch_size):
        index = order[start:start + self.batch_size]
        yield self.features[index], self.labels[index]


def ignores_drop_last(self):
    order = torch.randperm(len(self.labels), generator=self.generator)
    for start in range(0, len(self.labels), self.batch_size):
        index = order[start:start + self.batch_size]
        yield self.features[index], self.labels[index]


def from_the_global_generator(self):
    order = torch.randperm(len(self.labels))
    for start in range(0, len(self), self.batch_size):
        index = order[start:start + self.batch_size]
        yield self.features[index], self.labels[index]


def seeded_again_each_epoch(self):
    self.generator = torch.Generator().manual_seed(0)
    yield from DeviceBatches.__iter__(self)


def order_drawn_once(self):
    """Wrong, another way to the same symptom: one order, drawn the first time, kept."""
    if not hasattr(self, "order"):
        self.order = torch.randperm(len(self.labels), generator=self.generator)
    for start in starts(self):
        index = self.order[start:start + self.batch_size]
        yield self.features[index], self.labels[index]


def in_order(self):
    for start in starts(self):
        end = start + self.batch_size
        yield self.features[start:end], self.labels[start:end]


def moved_to_the_host(self):
    for features, labels in DeviceBatches.__iter__(self):
        yield features.cpu(), labels.cpu()


def moved_to_the_notebooks_device(self):  # the notebook's `device`, here a GPU stand-in
    for features, labels in DeviceBatches.__iter__(self):
        yield features.to("meta"), labels.to("meta")


def positions_as_a_list(self):
    """Wrong: the order on the device, brought back as a list for each batch."""
    order = torch.randperm(len(self.labels), generator=self.generator).to(self.features.device)
    for start in starts(self):
        index = order[start:start + self.batch_size].tolist()
        yield self.features[index], self.labels[index]


def randperm_on_the_device_with_a_cpu_generator(self):
    """Wrong on a GPU: randperm draws on the data's device with the CPU generator."""
    order = torch.randperm(len(self.labels), generator=self.generator,
                           device=self.features.device)
    for start in starts(self):
        index = order[start:start + self.batch_size]
        yield self.features[index], self.labels[index]


def one_item_at_a_time(self):
    order = torch.randperm(len(self.labels), generator=self.generator).to(self.features.device)
    for start in starts(self):
        rows = [int(i.item()) for i in order[start:start + self.batch_size]]
        yield self.features[rows], self.labels[rows]


def one_example_at_a_time(self):
    order = torch.randperm(len(self.labels), generator=self.generator)
    for start in starts(self):
        index = order[start:start + self.batch_size]
        yield (torch.stack([self.features[i] for i in index]),
               torch.stack([self.labels[i] for i in index]))


def as_dicts(self):
    for features, labels in DeviceBatches.__iter__(self):
        yield {"features": features, "labels": labels}


@pytest.mark.parametrize("body, says", [
    (two_orders, "a batch's features do not belong to its labels"),
    (with_replacement, "an epoch yielded some examples twice"),
    (always_drops_the_last, ("an epoch yielded 8 of the 10 examples: the last, smaller batch "
                             "was dropped")),
    (ignores_drop_last, ("drop_last=True, the batches had the sizes [4, 4, 2]: the last, smaller "
                         "batch was still there")),
    (seeded_again_each_epoch, ("an epoch repeated an earlier epoch's order (as a generator "
                               "seeded again at each epoch, or an order drawn once in __init__")),
    (order_drawn_once, "an epoch repeated an earlier epoch's order"),
    (in_order, "the batches come in the data's order"),
    (moved_to_the_host, ("on the meta device (a stand-in for a GPU), DeviceBatches copies "
                         "data to the host with `.cpu()`")),
    (positions_as_a_list, "DeviceBatches copies data to the host with `.tolist()`"),
    (randperm_on_the_device_with_a_cpu_generator, (
        "on the meta device (a stand-in for a GPU), DeviceBatches raised RuntimeError: Expected "
        "a 'cuda' device type for generator but found 'cpu'")),
    (one_item_at_a_time, "DeviceBatches copies data to the host with `.item()`"),
    (one_example_at_a_time, "builds each batch one example at a time"),
], ids=lambda value: getattr(value, "__name__", "says"))
def test_device_batches_mistakes_each_get_their_hint(body, says):
    message = failure(checks.check_device_batches, with_iter(body))
    assert says in message
    assert message.startswith("✘ ") and "How to fix it: " in message


class DeviceGeneratorCpuDraw(DeviceBatches):
    """Wrong on a GPU: a generator on the data's device, but randperm draws on the CPU."""

    def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
        super().__init__(features, labels, batch_size, seed, drop_last)
        self.generator = torch.Generator(device=features.device).manual_seed(seed)


class OrderOnCuda(DeviceBatches):
    """Wrong: the order sent to "cuda" whatever device the data are on."""

    def __iter__(self):
        order = torch.randperm(len(self.labels), generator=self.generator).to("cuda")
        for start in starts(self):
            index = order[start:start + self.batch_size]
            yield self.features[index], self.labels[index]


def test_device_batches_with_a_generator_on_another_device_than_randperm():
    message = failure(checks.check_device_batches, DeviceGeneratorCpuDraw)
    assert "on the meta device (a stand-in for a GPU), DeviceBatches raised RuntimeError: " \
        "Expected a 'cpu' device type for generator but found 'cuda'" in message
    assert "a generator must live where randperm draws" in message
    assert graded(checks.check_device_batches, (DeviceGeneratorCpuDraw,), hidden=True,
                  seed=1).fraction == pytest.approx(3 / 4)


def test_device_batches_sending_the_order_to_cuda():
    message = failure(checks.check_device_batches, OrderOnCuda)
    if torch.cuda.is_available():  # CPU data indexed with a CUDA order: torch refuses
        assert message.startswith("With n=10 examples and batch_size=4, DeviceBatches raised ")
    else:  # the refusal this build gives: a CPU-only one, or a CUDA one without a driver
        try:
            torch.zeros(1).to("cuda")
        except (AssertionError, RuntimeError) as error:
            refusal = f"{type(error).__name__}: {str(error)[:30]}"
        assert message.startswith("With n=10 examples and batch_size=4, DeviceBatches raised "
                                  + refusal), message
        assert '.to("cuda")`' in message


def test_device_batches_from_the_global_generator():
    class GlobalSeeded(DeviceBatches):
        def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
            super().__init__(features, labels, batch_size, seed, drop_last)
            torch.manual_seed(seed)
        __iter__ = from_the_global_generator

    message = failure(checks.check_device_batches, GlobalSeeded)
    assert "the order changed when other code drew from PyTorch's global generator" in message
    assert "torch.randperm(n, generator=self.generator)" in message
    unseeded = failure(checks.check_device_batches, with_iter(from_the_global_generator))
    assert "the same seed gave different orders" in unseeded


def test_device_batches_ignoring_the_seed():
    class FixedSeed(DeviceBatches):
        def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
            super().__init__(features, labels, batch_size, 123, drop_last)

    assert "two different seeds gave the same order" in failure(checks.check_device_batches,
                                                                FixedSeed)


@pytest.mark.parametrize("length, says", [
    (lambda self: len(self.labels) // self.batch_size, ("drop_last=False, len() is 2, but an "
                                                       "epoch has 3 batches")),
    (lambda self: len(self.labels) // self.batch_size + 1, ("drop_last=True, len() is 3, but an "
                                                           "epoch has 2 batches")),
])
def test_device_batches_wrong_length(length, says):
    def batches_without_len(self):
        end = len(self.labels) // self.batch_size * self.batch_size if self.drop_last \
            else len(self.labels)
        order = torch.randperm(len(self.labels), generator=self.generator)
        for start in range(0, end, self.batch_size):
            index = order[start:start + self.batch_size]
            yield self.features[index], self.labels[index]

    wrong = type("WrongLength", (DeviceBatches,),
                 {"__len__": length, "__iter__": batches_without_len})
    message = failure(checks.check_device_batches, wrong)
    assert says in message and "return ceil(n / batch_size)" in message
    hidden = failure(checks.check_device_batches, wrong, hidden=True, seed=1)
    assert "len() is" in hidden and "but an epoch has" not in hidden


def test_device_batches_without_len():
    class NoLength:
        def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
            self.inner = DeviceBatches(features, labels, batch_size, seed, drop_last)

        def __iter__(self):
            return iter(self.inner)

    message = failure(checks.check_device_batches, NoLength)
    assert "len(DeviceBatches(...)) raised TypeError" in message
    assert "define __len__(self)" in message
    assert graded(checks.check_device_batches, (NoLength,), hidden=True, seed=1).fraction == \
        pytest.approx(3 / 4)


def test_device_batches_without_drop_last_argument():
    class NoDropLast(DeviceBatches):
        def __init__(self, features, labels, batch_size, seed=0):
            super().__init__(features, labels, batch_size, seed)

    message = failure(checks.check_device_batches, NoDropLast)
    assert "DeviceBatches(..., drop_last=True) raised TypeError" in message


def test_device_batches_moved_to_the_notebooks_device():
    message = failure(checks.check_device_batches, with_iter(moved_to_the_notebooks_device))
    assert "DeviceBatches yielded tensors on meta and meta, from data on the CPU" in message
    assert "do not move them to another device" in message


def test_device_batches_yielding_dicts():
    message = failure(checks.check_device_batches, with_iter(as_dicts))
    assert message.startswith("With n=10 examples and batch_size=4, DeviceBatches yielded dict,")


def test_device_batches_not_implemented():
    class Stub:
        def __init__(self, features, labels, batch_size, seed=0, drop_last=False):
            raise NotImplementedError()

    assert "DeviceBatches is not implemented yet" in failure(checks.check_device_batches, Stub)


@pytest.mark.parametrize("body, share", [(ignores_drop_last, 3 / 4), (in_order, 3 / 4),
                                         (one_example_at_a_time, 3 / 4),
                                         (always_drops_the_last, 3 / 4), (two_orders, 3 / 4)])
def test_device_batches_partial_credit(body, share):
    verdict = graded(checks.check_device_batches, (with_iter(body),), hidden=True, seed=1)
    assert verdict.fraction == pytest.approx(share)


def test_device_batches_hidden_inputs_cover_both_kinds_of_last_batch():
    for seed in HIDDEN_SEEDS:
        configs = checks.check_device_batches.make_inputs(seed, True)["configs"]
        assert sorted(bool(c["n"] % c["batch_size"]) for c in configs) == [False, True]
        assert all(c["seeds"][0] != c["seeds"][1] for c in configs)


def test_meta_recorder_sees_host_copies_and_single_examples():
    from course_utils.probe import meta_recorder

    data = torch.empty(6, 3, device="meta")
    with meta_recorder() as recorder:
        data[torch.tensor([0, 2])]  # one indexing per batch: neither
        data[1]  # one example
        with pytest.raises(NotImplementedError):
            data.to("cpu")
        torch.zeros(2).tolist()  # CPU tensors are not the device's data
    assert recorder.host == [".to()"] and recorder.single == 1


def test_meta_generators_stand_in_for_a_gpus_and_are_removed():
    from course_utils.probe import meta_generators, patched

    real = (torch.Generator, torch.randperm)
    with patched(meta_generators()):
        on_device = torch.Generator(device="meta").manual_seed(0)
        assert isinstance(on_device, torch.Generator)
        assert torch.randperm(4, generator=on_device, device="meta").device.type == "meta"
        assert torch.randperm(4, generator=torch.Generator().manual_seed(0)).shape == (4,)
        with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator"):
            torch.randperm(4, generator=torch.Generator(), device="meta")
    assert (torch.Generator, torch.randperm) == real
