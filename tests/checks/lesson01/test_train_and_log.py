"""Tests of the check course_utils/checks/lesson01/train_and_log.py."""
from __future__ import annotations

import json

import pytest
import torch

from course_utils import checks

from ...probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from ...solutions import solution
from .shared import (
    ON_GPU,
    predict,
    predict_moves_model,
    predict_stays_on_device,
    predict_unassigned,
    to_device,
    to_device_in_place,
    to_device_moves_everything,
    to_device_no_dicts,
    with_answers,
)

train_and_log = solution("01_tensors_devices", "train_and_log")


# ------------------------------------------------------------------ train_and_log

def train_and_log_stacked(step, n_steps, log_every):
    """Another right answer: keep the detached losses of a block, one .item() on their mean."""
    logged, block = [], []
    for _ in range(n_steps):
        block.append(step().detach())
        if len(block) == log_every:
            logged.append(torch.stack(block).mean().item())
            block = []
    return logged


def train_and_log_in_place(step, n_steps, log_every):
    """Another right answer: a 0-d running total made on the loss's device, added to in place."""
    logged, running = [], None
    for i in range(n_steps):
        loss = step().detach()
        running = torch.zeros_like(loss) if running is None else running
        running += loss
        if (i + 1) % log_every == 0:
            logged.append(float(running) / log_every)
            running.zero_()
    return logged


def train_and_log_every_step(step, n_steps, log_every):
    logged, running = [], 0.0
    for i in range(n_steps):
        running += step().item()  # a copy, and on a GPU a sync, at every step
        if (i + 1) % log_every == 0:
            logged.append(running / log_every)
            running = 0.0
    return logged


def train_and_log_float_every_step(step, n_steps, log_every):
    logged, total = [], 0.0
    for i in range(n_steps):
        total += float(step().detach())
        if (i + 1) % log_every == 0:
            logged.append(total / log_every)
            total = 0.0
    return logged


def train_and_log_keeps_graphs(step, n_steps, log_every):
    logged, running = [], 0.0
    for i in range(n_steps):
        running = running + step()  # the graph of every step of the block stays alive
        if (i + 1) % log_every == 0:
            logged.append(running.detach().item() / log_every)
            running = 0.0
    return logged


def train_and_log_sums(step, n_steps, log_every):
    return [mean * log_every for mean in train_and_log(step, n_steps, log_every)]


def train_and_log_last(step, n_steps, log_every):
    logged = []
    for i in range(n_steps):
        loss = step().detach()
        if (i + 1) % log_every == 0:
            logged.append(loss.item())
    return logged


def train_and_log_never_resets(step, n_steps, log_every):
    logged, running = [], 0.0
    for i in range(n_steps):
        running = running + step().detach()
        if (i + 1) % log_every == 0:
            logged.append(running.item() / log_every)
    return logged


def train_and_log_tensors(step, n_steps, log_every):
    logged, running = [], 0.0
    for i in range(n_steps):
        running = running + step().detach()
        if (i + 1) % log_every == 0:
            logged.append(running / log_every)
            running = 0.0
    return logged


def train_and_log_every_step_logged(step, n_steps, log_every):
    return [step().item() for _ in range(n_steps)]


def train_and_log_one_step_short(step, n_steps, log_every):
    return train_and_log(step, n_steps - 1, log_every) if n_steps > 1 else []


def train_and_log_stub(step, n_steps, log_every):
    raise NotImplementedError()


@pytest.mark.parametrize("answer", [train_and_log, train_and_log_stacked, train_and_log_in_place])
def test_train_and_log_right_answers(answer, capsys):
    passes(checks.check_train_and_log, answer)
    assert "one number to the CPU per block" in capsys.readouterr().out


@pytest.mark.parametrize("answer, expected", [
    (train_and_log_every_step, "copied a tensor to the CPU 12 times (`item()`) for 3 blocks"),
    (train_and_log_float_every_step, "12 times (`float(tensor)`)"),
    (train_and_log_keeps_graphs, "graphs of earlier steps were still alive"),
    (train_and_log_sums, "Block 0's logged value is the sum of its losses"),
    (train_and_log_last, "Block 0's logged value is the loss of its last step only"),
    (train_and_log_never_resets, ("Block 1's logged value, 3.307, is the sum of the losses of "
                                  "steps 1 to 8 divided by 4, not the mean of steps 5 to 8: the "
                                  "running total was not reset after the previous block.")),
    (train_and_log_tensors, ("returned tensors, not Python floats: it read no value to the CPU "
                             "(no `.item()`")),
    (train_and_log_every_step_logged, ("logged 12 value(s) (one per step) for n_steps=12 steps "
                                      "in blocks of log_every=4: it should log 3")),
    (train_and_log_one_step_short, "called step() 11 time(s), not n_steps = 12 times"),
    (train_and_log_stub, "is not implemented yet"),
])
def test_train_and_log_mistakes(answer, expected):
    assert expected in failure(checks.check_train_and_log, answer)


def test_train_and_log_the_sync_message_names_the_cost_and_the_fix():
    message = failure(checks.check_train_and_log, train_and_log_every_step)
    assert "On a GPU each copy waits until all queued work has finished" in message
    assert "How to fix it: keep the running total on the device and detached" in message
    assert "`running = running + loss.detach()`" in message


def train_and_log_off_scale(step, n_steps, log_every):
    """Wrong in a way no run of steps explains: the message falls back to the expected mean."""
    logged, running = [], 0.0
    for i in range(n_steps):
        running = running + step().detach()
        if (i + 1) % log_every == 0:
            logged.append(running.item() / (log_every + 0.5))
            running = 0.0
    return logged


def test_train_and_log_hidden_cases_never_reveal_the_expected_means():
    assert "expected about" in failure(checks.check_train_and_log, train_and_log_off_scale)
    for seed in HIDDEN_SEEDS:
        inputs = checks.check_train_and_log.make_inputs(seed, True)
        assert inputs["n_steps"] % inputs["log_every"] == 0 and inputs["n_steps"] > \
            inputs["log_every"]
        message = failure(checks.check_train_and_log, train_and_log_off_scale, hidden=True,
                          seed=seed)
        assert "expected about" not in message


def test_train_and_log_probe_restores_the_tensor_methods_it_counts():
    counted = ("item", "tolist", "cpu", "numpy", "__float__", "__int__", "__bool__")
    before = {name: getattr(torch.Tensor, name) for name in counted}
    checks.check_train_and_log(train_and_log)
    failure(checks.check_train_and_log, train_and_log_every_step)
    assert {name: getattr(torch.Tensor, name) for name in counted} == before


# ------------------------------------------------------------------ inputs and probes

def test_hidden_inputs_vary_with_the_seed():
    """Checks the computed exercises draw different hidden cases for different seeds."""
    for check in (checks.check_to_device, checks.check_predict, checks.check_train_and_log):
        made = [check.make_inputs(seed, True) for seed in HIDDEN_SEEDS]
        assert len({json.dumps(inputs) for inputs in made}) > 1


CASES = [
    (checks.check_to_device, to_device),
    (checks.check_to_device, to_device_no_dicts),
    (checks.check_to_device, to_device_in_place),
    (checks.check_to_device, to_device_moves_everything),
    (checks.check_predict, predict),
    (checks.check_predict, predict_unassigned),
    (checks.check_predict, predict_moves_model),
    (checks.check_predict, predict_stays_on_device),
    (checks.check_on_gpu, ON_GPU),
    (checks.check_on_gpu, with_answers(g=True)),
    (checks.check_train_and_log, train_and_log),
    (checks.check_train_and_log, train_and_log_keeps_graphs),
]


@pytest.mark.parametrize("check, answer", CASES)
@pytest.mark.parametrize("hidden, seed", [(False, 0), (True, 1), (True, 42)])
def test_probe_source_is_self_contained(check, answer, hidden, seed):
    verdict = graded(check, (answer,), hidden=hidden, seed=seed)  # asserts both ways agree
    if answer is to_device or answer is predict or answer is ON_GPU or answer is train_and_log:
        assert verdict.passed


def test_probes_leave_torch_as_they_found_it():
    """The probes define tensor subclasses locally; torch.Tensor itself is not patched."""
    before = (torch.Tensor.to, torch.Tensor.cpu, torch.nn.Module.to)
    checks.check_predict(predict)
    checks.check_to_device(to_device)
    assert (torch.Tensor.to, torch.Tensor.cpu, torch.nn.Module.to) == before
