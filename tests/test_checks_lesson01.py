"""Lesson 01 checks: right answers pass, each typical mistake gets its own hint."""
from __future__ import annotations

import collections
import collections.abc
import json

import numpy as np
import pytest
import torch

from course_utils import checks, get_device

from .probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from .solutions import solution

to_device = solution("01_tensors_devices", "to_device")
predict = solution("01_tensors_devices", "predict")
ON_GPU = solution("01_tensors_devices", "on_gpu")
train_and_log = solution("01_tensors_devices", "train_and_log")

# ------------------------------------------------------------------ to_device

def to_device_type_preserving(obj, device):
    """Another right answer: rebuild every container with its own type."""
    if torch.is_tensor(obj):
        return obj.to(device=device)
    if isinstance(obj, collections.abc.Mapping):
        return type(obj)((key, to_device_type_preserving(v, device)) for key, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device_type_preserving(item, device) for item in obj)
    return obj


def to_device_no_dicts(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, list):
        return [to_device_no_dicts(item, device) for item in obj]
    if isinstance(obj, tuple):
        return tuple(to_device_no_dicts(item, device) for item in obj)
    return obj


def to_device_no_tuples(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {key: to_device_no_tuples(value, device) for key, value in obj.items()}
    if isinstance(obj, list):
        return [to_device_no_tuples(item, device) for item in obj]
    return obj


def to_device_no_lists(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {key: to_device_no_lists(value, device) for key, value in obj.items()}
    if isinstance(obj, tuple):
        return tuple(to_device_no_lists(item, device) for item in obj)
    return obj


def to_device_tuple_as_list(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {key: to_device_tuple_as_list(value, device) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_device_tuple_as_list(item, device) for item in obj]
    return obj


def to_device_moves_everything(obj, device):
    if isinstance(obj, dict):
        return {key: to_device_moves_everything(value, device) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device_moves_everything(item, device) for item in obj)
    return obj.to(device)


def to_device_in_place(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        for key in obj:
            obj[key] = to_device_in_place(obj[key], device)
        return obj
    if isinstance(obj, list):
        for index, item in enumerate(obj):
            obj[index] = to_device_in_place(item, device)
        return obj
    if isinstance(obj, tuple):
        return tuple(to_device_in_place(item, device) for item in obj)
    return obj


def to_device_forgets_return(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        {key: to_device_forgets_return(value, device) for key, value in obj.items()}
        return None
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device_forgets_return(item, device) for item in obj)
    return obj


def to_device_with_dtype(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device, torch.float32)
    return to_device(obj, device) if not isinstance(obj, (dict, list, tuple)) else (
        {key: to_device_with_dtype(value, device) for key, value in obj.items()}
        if isinstance(obj, dict) else type(obj)(to_device_with_dtype(i, device) for i in obj))


def to_device_as_tensor(obj, device):
    if isinstance(obj, dict):
        return {key: to_device_as_tensor(value, device) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device_as_tensor(item, device) for item in obj)
    if obj is None or isinstance(obj, str):
        return obj
    return torch.as_tensor(obj).to(device)


def to_device_any_sequence(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {key: to_device_any_sequence(value, device) for key, value in obj.items()}
    if isinstance(obj, collections.abc.Sequence):  # "abc" is a sequence of "a", "b", "c"...
        return type(obj)([to_device_any_sequence(item, device) for item in obj])
    return obj


def to_device_any_sequence_lazily(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {key: to_device_any_sequence_lazily(value, device) for key, value in obj.items()}
    if isinstance(obj, collections.abc.Sequence):  # str(generator) is "<generator ...>"
        return type(obj)(to_device_any_sequence_lazily(item, device) for item in obj)
    return obj


def to_device_ignores_argument(obj, device):
    return to_device(obj, get_device())


def to_device_unassigned(obj, device):
    if isinstance(obj, torch.Tensor):
        obj.to(device)
        return obj
    if isinstance(obj, dict):
        return {key: to_device_unassigned(value, device) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device_unassigned(item, device) for item in obj)
    return obj


def to_device_star_args(obj, device):
    """A namedtuple-style rebuild applied to every tuple."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {key: to_device_star_args(value, device) for key, value in obj.items()}
    if isinstance(obj, list):
        return [to_device_star_args(item, device) for item in obj]
    if isinstance(obj, tuple):
        return type(obj)(*[to_device_star_args(item, device) for item in obj])
    return obj


def to_device_drops_empty(obj, device):
    """Right on the visible structures; empty containers come back as None."""
    if isinstance(obj, (dict, list, tuple)) and len(obj) == 0:
        return None
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {key: to_device_drops_empty(value, device) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device_drops_empty(item, device) for item in obj)
    return obj


def to_device_not_done(obj, device):
    raise NotImplementedError()


@pytest.mark.parametrize("answer", [to_device, to_device_type_preserving])
def test_to_device_correct(answer, capsys):
    passes(checks.check_to_device, answer)
    assert "✔ to_device() moves every tensor" in capsys.readouterr().out


def test_to_device_solution_keeps_namedtuples():
    """The bonus: the reference solution rebuilds a namedtuple as the same namedtuple."""
    Batch = collections.namedtuple("Batch", ["inputs", "targets"])
    moved = to_device(Batch(torch.ones(2), [torch.zeros(1), "x"]), "meta")
    assert type(moved) is Batch and moved.inputs.device.type == "meta"
    assert moved.targets[0].device.type == "meta" and moved.targets[1] == "x"


@pytest.mark.parametrize("answer, expected", [
    (to_device_no_dicts, "recurse into dicts"),
    (to_device_no_tuples, "recurse into tuples"),
    (to_device_no_lists, "recurse into lists"),
    (to_device_tuple_as_list, "a tuple came back as a list"),
    (to_device_moves_everything, "only tensors have `.to()`"),
    (to_device_in_place, "changed the structure it was given"),
    (to_device_forgets_return, "came back as None"),
    (to_device_with_dtype, "pass only the device"),
    (to_device_as_tensor, "came back as a Tensor"),
    (to_device_any_sequence, "a string is a sequence too"),
    (to_device_any_sequence_lazily, "a string is a sequence too"),
    (to_device_ignores_argument, "with the `device` argument you were given"),
    (to_device_unassigned, "`.to()` returns a new tensor"),
    (to_device_star_args, "`tuple()` takes one iterable"),
    (to_device_not_done, "not implemented yet"),
])
def test_to_device_mistakes(answer, expected):
    message = failure(checks.check_to_device, answer)
    assert expected in message
    assert "How to fix it:" in message


def test_to_device_messages_name_where():
    message = failure(checks.check_to_device, to_device_no_dicts)
    assert "obj['images']" in message and "inside a dict" in message
    message = failure(checks.check_to_device, to_device_tuple_as_list)
    assert "At obj['extra']" in message and "tuple(to_device(item, device)" in message
    message = failure(checks.check_to_device, to_device_moves_everything)
    assert "AttributeError" in message and "isinstance(obj, torch.Tensor)" in message
    message = failure(checks.check_to_device, to_device_with_dtype)
    assert "an int64 tensor became float32" in message
    message = failure(checks.check_to_device, to_device_as_tensor)
    assert "an int came back as a Tensor" in message


def test_to_device_empty_containers_fail_only_the_hidden_part():
    checks.check_to_device(to_device_drops_empty)
    for seed in HIDDEN_SEEDS:
        message = failure(checks.check_to_device, to_device_drops_empty, hidden=True, seed=seed)
        assert "came back as None." in message


def test_to_device_leaves_the_caller_structure_alone():
    batch = {"x": torch.ones(2), "y": [torch.zeros(1), 3], "z": (np.ones(2), None)}
    moved = to_device(batch, "meta")
    assert batch["x"].device.type == "cpu" and batch["y"][0].device.type == "cpu"
    assert moved["z"][0] is batch["z"][0] and moved["y"][1] == 3


# ------------------------------------------------------------------ predict

def predict_detach(model, inputs):
    """Another right answer: detach instead of no_grad, .to('cpu') instead of .cpu()."""
    device = next(model.parameters()).device
    return model(inputs.to(device)).detach().to("cpu")


def predict_as_given(model, inputs):  # the broken snippet of the lesson, verbatim
    device = get_device()
    inputs.to(device)
    return model(inputs)


def predict_unassigned(model, inputs):
    inputs.to(next(model.parameters()).device)
    with torch.no_grad():
        return model(inputs).cpu()


def predict_own_device(model, inputs):
    inputs = inputs.to(get_device())
    with torch.no_grad():
        return model(inputs).cpu()


def predict_no_move(model, inputs):
    with torch.no_grad():
        return model(inputs).cpu()


def predict_moves_model(model, inputs):
    model.to(inputs.device)
    with torch.no_grad():
        return model(inputs).cpu()


def predict_stays_on_device(model, inputs):
    inputs = inputs.to(next(model.parameters()).device)
    with torch.no_grad():
        return model(inputs)


def predict_with_grad(model, inputs):
    inputs = inputs.to(next(model.parameters()).device)
    return model(inputs).cpu()


def predict_numpy(model, inputs):
    return predict(model, inputs).numpy()


def predict_weight(model, inputs):
    inputs = inputs.to(model.weight.device)
    with torch.no_grad():
        return model(inputs).cpu()


def predict_cuda(model, inputs):
    with torch.no_grad():
        return model.cuda()(inputs.cuda()).cpu()


def predict_softmax(model, inputs):
    return predict(model, inputs).softmax(dim=-1)


def predict_not_done(model, inputs):
    raise NotImplementedError()


@pytest.mark.parametrize("answer", [predict, predict_detach])
def test_predict_correct(answer, capsys):
    passes(checks.check_predict, answer)
    shown = capsys.readouterr().out
    assert "✔ predict() runs the model on the device its parameters are on" in shown


@pytest.mark.parametrize("answer, expected", [
    (predict_as_given, "with torch.no_grad():"),
    (predict_unassigned, "`inputs.to(device)` returns a new tensor: assign it"),
    (predict_own_device, "ask the model where it lives"),
    (predict_no_move, "predict() did not move them"),
    (predict_moves_model, "predict() moved the model"),
    (predict_stays_on_device, "instead of bringing them back to the CPU"),
    (predict_with_grad, "still attached to the autograd graph"),
    (predict_numpy, "returned a NumPy array, not a tensor"),
    (predict_weight, "not every model has `.weight`"),
    (predict_softmax, "unchanged apart from the move to the CPU"),
    (predict_not_done, "not implemented yet"),
])
def test_predict_mistakes(answer, expected):
    message = failure(checks.check_predict, answer)
    assert expected in message
    assert "How to fix it:" in message


@pytest.mark.skipif(torch.cuda.is_available(), reason="hard-coded CUDA works on a CUDA machine")
def test_predict_hard_coded_cuda():
    message = failure(checks.check_predict, predict_cuda)
    assert "don't name a device in predict()" in message


def test_predict_unassigned_names_the_devices():
    message = failure(checks.check_predict, predict_unassigned)
    assert "model on the 'meta' device" in message and "inputs on 'cpu'" in message


def test_predict_visible_values_are_revealed_hidden_ones_are_not():
    assert "expected about" in failure(checks.check_predict, predict_softmax)
    for seed in HIDDEN_SEEDS:
        message = failure(checks.check_predict, predict_softmax, hidden=True, seed=seed)
        assert "expected about" not in message


# ------------------------------------------------------------------ on_gpu

def with_answers(**changes):
    return dict(ON_GPU, **changes)


def test_on_gpu_correct(capsys):
    passes(checks.check_on_gpu, ON_GPU)
    assert "✔ Your predictions" in capsys.readouterr().out


@pytest.mark.parametrize("answer, expected", [
    (list(ON_GPU.values()), "on_gpu is a list, not a dict"),
    ({key: value for key, value in ON_GPU.items() if key != "h"}, "missing ['h']"),
    (with_answers(A=True), "unexpected ['A']"),
    (with_answers(c="False"), "on_gpu['c'] is a str, not True or False"),
    (with_answers(d=None), "Line d is not answered yet (None)"),
    (with_answers(a=True), "This is the classic bug"),
    (with_answers(b=False), "moves the module's parameters in place"),
    (with_answers(c=True), "the GPU copy is called `y`"),
    (with_answers(d=False), "creates the tensor directly on the GPU"),
])
def test_on_gpu_mistakes(answer, expected):
    assert expected in failure(checks.check_on_gpu, answer)


@pytest.mark.parametrize("line", "efgh")
def test_on_gpu_hidden_lines_fail_only_the_hidden_part_without_the_answer(line):
    answer = with_answers(**{line: not ON_GPU[line]})
    checks.check_on_gpu(answer)
    message = failure(checks.check_on_gpu, answer, hidden=True, seed=0)
    assert f"Your prediction for line {line} is not right." in message
    assert "True" not in message and "False" not in message


def test_on_gpu_earns_a_share_per_line_and_lists_each_wrong_line():
    answer = with_answers(a=True, b=False, g=True)
    message = failure(checks.check_on_gpu, answer)
    assert message.startswith("✘ line a: Your prediction for line a is not right")
    assert "✘ line b:" in message and "✔ passed: line c; line d" in message
    assert graded(checks.check_on_gpu, (answer,), hidden=False, seed=0).fraction == 0.5
    assert graded(checks.check_on_gpu, (answer,), hidden=True, seed=0).fraction == 5 / 8


def test_on_gpu_stub_is_answered_with_a_message_not_a_name_error():
    stub = {line: None for line in "abcdefgh"}
    message = failure(checks.check_on_gpu, stub)
    assert message.startswith("on_gpu is not answered yet: lines a, b, c, d are None.")


def test_no_hidden_answer_ships_in_the_installed_package():
    from pathlib import Path

    import course_utils
    package = Path(course_utils.__file__).parent
    text = "\n".join(path.read_text() for path in package.rglob("*.py"))
    for line in "efgh":
        assert f'"{line}": True' not in text and f'"{line}": False' not in text


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
    (train_and_log_never_resets, "Block 1's logged mean loss is"),
    (train_and_log_tensors, "returned tensors, not Python floats"),
    (train_and_log_every_step_logged, "logged 12 value(s) (one per step) for 12 steps"),
    (train_and_log_one_step_short, "called step() 11 time(s)"),
    (train_and_log_stub, "is not implemented yet"),
])
def test_train_and_log_mistakes(answer, expected):
    assert expected in failure(checks.check_train_and_log, answer)


def test_train_and_log_the_sync_message_names_the_cost_and_the_fix():
    message = failure(checks.check_train_and_log, train_and_log_every_step)
    assert "On a GPU each copy waits until all queued work has finished" in message
    assert "How to fix it: keep the running total on the device and detached" in message
    assert "`running = running + loss.detach()`" in message


def test_train_and_log_hidden_cases_never_reveal_the_expected_means():
    assert "expected about" in failure(checks.check_train_and_log, train_and_log_never_resets)
    for seed in HIDDEN_SEEDS:
        inputs = checks.check_train_and_log.make_inputs(seed, True)
        assert inputs["n_steps"] % inputs["log_every"] == 0 and inputs["n_steps"] > \
            inputs["log_every"]
        message = failure(checks.check_train_and_log, train_and_log_never_resets, hidden=True,
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
