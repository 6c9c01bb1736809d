"""Tests of the check course_utils/checks/lesson04/find_bottleneck.py."""
from __future__ import annotations

import statistics
import time
import timeit
from time import perf_counter_ns

import pytest
import torch

from course_utils import checks, synchronize
from course_utils.checks.framework import run_probe
from course_utils.checks.lesson04.find_bottleneck import HIDDEN as HIDDEN_MACHINES

from ...probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from ...solutions import solution

find_bottleneck = solution("04_input_pipeline", "find_bottleneck")


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


def test_find_bottleneck_dividing_by_a_wrong_count():
    message = failure(checks.check_find_bottleneck, answer(summarise=lambda times: sum(times) / (
        len(times) + 1)))
    assert "divided both stage totals by 5, but the loader gave 4 batches." in message


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
