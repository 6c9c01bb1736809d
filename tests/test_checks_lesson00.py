"""Lesson 00 checks: right answers pass, each typical mistake gets its own hint."""
from __future__ import annotations

import json

import pytest
import torch

from course_utils import checks, get_device

from .probe_roundtrip import HIDDEN_SEEDS, both_ways, failure, passes, verdict






# ------------------------------------------------------------------ pick_device

def pick_device():
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def pick_device_with_accelerator_api():
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    return torch.device("cpu") if accelerator is None else torch.device(accelerator.type)


def pick_device_with_course_utils():
    return get_device()


def pick_device_missing_else_overwrites():  # the source material's bug, verbatim
    if torch.cuda.is_available():
        device = torch.device("cuda")
        device = torch.device("cpu")
    return device  # noqa: F821 - deliberately unbound on a CPU machine


def pick_device_missing_else():
    if torch.cuda.is_available():
        device = torch.device("cuda")
    elif torch.backends.mps.is_available():
        device = torch.device("mps")
    return device


def pick_device_string():
    return "cuda" if torch.cuda.is_available() else "cpu"


def pick_device_bool():
    return torch.cuda.is_available()


def pick_device_mps_first():
    if torch.backends.mps.is_available():
        return torch.device("mps")
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


def pick_device_cuda_only():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def pick_device_second_gpu():
    return torch.device("cuda:1") if torch.cuda.is_available() else torch.device("cpu")


def pick_device_not_done():
    raise NotImplementedError()


@pytest.mark.parametrize("answer", [pick_device, pick_device_with_accelerator_api,
                                    pick_device_with_course_utils])
def test_pick_device_correct(answer, capsys):
    passes(checks.check_pick_device, answer)
    assert "✔ pick_device() picks CUDA, then MPS, then the CPU." in capsys.readouterr().out


def test_pick_device_leaves_torch_unpatched():
    real = (torch.cuda.is_available, torch.backends.mps.is_available,
            torch.accelerator.current_accelerator)
    checks.check_pick_device(pick_device, hidden=True, seed=3)
    assert (torch.cuda.is_available, torch.backends.mps.is_available,
            torch.accelerator.current_accelerator) == real


def test_pick_device_missing_else_that_overwrites():
    message = failure(checks.check_pick_device, pick_device_missing_else_overwrites)
    assert "CUDA=True" in message and "returned 'cpu'" in message
    assert "else:" in message


def test_pick_device_missing_else_unbound():
    message = failure(checks.check_pick_device, pick_device_missing_else)
    assert "UnboundLocalError" in message
    assert "add the missing `else: device = torch.device('cpu')`" in message


def test_pick_device_returning_a_string():
    message = failure(checks.check_pick_device, pick_device_string)
    assert "returned a str, not a torch.device" in message
    assert "not a string or a bool" in message


def test_pick_device_returning_a_bool():
    assert "returned a bool" in failure(checks.check_pick_device, pick_device_bool)


def test_pick_device_mps_before_cuda_fails_the_hidden_part():
    checks.check_pick_device(pick_device_mps_first)  # the visible machines have no MPS
    message = failure(checks.check_pick_device, pick_device_mps_first, hidden=True, seed=0)
    assert "CUDA=True and MPS=True" in message and "returned 'mps'" in message
    assert "torch.cuda.is_available() first" in message


def test_pick_device_forgetting_mps_fails_the_hidden_part():
    message = failure(checks.check_pick_device, pick_device_cuda_only, hidden=True, seed=0)
    assert "CUDA=False and MPS=True" in message and "should pick 'mps'" in message


def test_pick_device_wrong_index():
    message = failure(checks.check_pick_device, pick_device_second_gpu)
    assert "'cuda:1'" in message and "index 0 or no index" in message


def test_pick_device_not_implemented():
    message = failure(checks.check_pick_device, pick_device_not_done)
    assert "not implemented yet" in message


# ------------------------------------------------------------------ gpu_inventory

def gpu_inventory():
    inventory = []
    for index in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(index)
        inventory.append({
            "index": index,
            "name": props.name,
            "memory_gib": props.total_memory / 2**30,
            "capability": f"{props.major}.{props.minor}",
            "sm_count": props.multi_processor_count,
        })
    return inventory


def gpu_inventory_other_apis():
    """Device strings, get_device_name and get_device_capability: just as right."""
    if not torch.cuda.is_available():
        return []
    inventory = []
    for index in range(torch.cuda.device_count()):
        device = f"cuda:{index}"
        major, minor = torch.cuda.get_device_capability(device)
        props = torch.cuda.get_device_properties(torch.device(device))
        inventory.append({
            "index": index,
            "name": torch.cuda.get_device_name(device),
            "memory_gib": round(props.total_memory / 2**30, 3),
            "capability": f"{major}.{minor}",
            "sm_count": props.multi_processor_count,
        })
    return inventory


def with_entry_change(change):
    def answer():
        inventory = gpu_inventory()
        for entry, index in zip(inventory, range(len(inventory))):
            change(entry, torch.cuda.get_device_properties(index))
        return inventory
    return answer


def gpu_inventory_gb(entry, props):
    entry["memory_gib"] = props.total_memory / 1e9


def gpu_inventory_mib(entry, props):
    entry["memory_gib"] = props.total_memory / 2**20


def gpu_inventory_tuple(entry, props):
    entry["capability"] = (props.major, props.minor)


def gpu_inventory_float_capability(entry, props):
    entry["capability"] = props.major + props.minor / 10


def gpu_inventory_wrong_keys(entry, props):
    entry["memory_gb"] = entry.pop("memory_gib")


def gpu_inventory_extra_key(entry, props):
    entry["bf16"] = props.major >= 8


def gpu_inventory_sm_from_name(entry, props):
    entry["sm_count"] = props.major * 10


def gpu_inventory_crashes_without_gpu():
    first = torch.cuda.get_device_name(0)  # assumes there is a GPU 0
    return [dict(entry, name=first if entry["index"] == 0 else entry["name"])
            for entry in gpu_inventory()]


def gpu_inventory_raises_without_gpu():
    if not torch.cuda.is_available():
        raise RuntimeError("no GPU here")
    return gpu_inventory()


def gpu_inventory_first_only():
    return gpu_inventory()[:1]


def gpu_inventory_dict():
    return {entry["index"]: entry for entry in gpu_inventory()}


def gpu_inventory_not_done():
    raise NotImplementedError()


@pytest.mark.parametrize("answer", [gpu_inventory, gpu_inventory_other_apis])
def test_gpu_inventory_correct(answer, capsys):
    passes(checks.check_gpu_inventory, answer)
    assert "✔ gpu_inventory() reports" in capsys.readouterr().out


@pytest.mark.parametrize("change, expected", [
    (gpu_inventory_gb, "divide bytes by 2**30 (GiB), not 1e9 (GB)."),
    (gpu_inventory_mib, "use props.total_memory (bytes) / 2**30."),
    (gpu_inventory_tuple, "write it as the string f'{props.major}.{props.minor}'"),
    (gpu_inventory_float_capability, "write it as the string"),
    (gpu_inventory_wrong_keys, "give each GPU exactly the keys ['index', 'name', 'memory_gib',"),
    (gpu_inventory_extra_key, "give each GPU exactly the keys"),
    (gpu_inventory_sm_from_name, "use props.multi_processor_count"),
])
def test_gpu_inventory_entry_mistakes(change, expected):
    message = failure(checks.check_gpu_inventory, with_entry_change(change))
    assert expected in message
    assert "On a machine with 2 GPU(s)" in message


def test_gpu_inventory_capability_tuple_names_the_value():
    message = failure(checks.check_gpu_inventory, with_entry_change(gpu_inventory_tuple))
    assert "capability is (9, 0)" in message


@pytest.mark.parametrize("answer", [gpu_inventory_crashes_without_gpu,
                                    gpu_inventory_raises_without_gpu])
def test_gpu_inventory_crashing_without_a_gpu(answer):
    message = failure(checks.check_gpu_inventory, answer)
    assert "On a machine with 0 GPU(s)" in message
    assert "with no GPU, return [] before asking for device properties." in message


def test_gpu_inventory_wrong_count():
    message = failure(checks.check_gpu_inventory, gpu_inventory_first_only)
    assert "returned 1 entries" in message and "range(torch.cuda.device_count())" in message


def test_gpu_inventory_not_a_list():
    assert "returned a dict, not a list" in failure(checks.check_gpu_inventory,
                                                    gpu_inventory_dict)


def test_gpu_inventory_not_implemented():
    assert "not implemented yet" in failure(checks.check_gpu_inventory, gpu_inventory_not_done)


def test_gpu_inventory_hidden_messages_do_not_reveal_answers():
    for seed in HIDDEN_SEEDS:
        message = failure(checks.check_gpu_inventory, with_entry_change(gpu_inventory_gb),
                          hidden=True, seed=seed)
        inputs = checks.check_gpu_inventory.make_inputs(seed, True)
        for gpus in inputs["machines"]:
            for spec in gpus:
                assert f"{spec['total_memory'] / 2**30:.2f}" not in message


def test_hidden_inputs_depend_on_the_seed_and_are_json():
    for check in (checks.check_pick_device, checks.check_gpu_inventory):
        made = [check.make_inputs(seed, True) for seed in HIDDEN_SEEDS]
        assert all(json.loads(json.dumps(inputs)) == inputs for inputs in made)
        assert len({json.dumps(inputs) for inputs in made}) > 1
        assert check.make_inputs(0, False) == check.make_inputs(5, False)


# ------------------------------------------------------------------ probes are self-contained

CASES = [
    (checks.check_pick_device, pick_device),
    (checks.check_pick_device, pick_device_string),
    (checks.check_pick_device, pick_device_missing_else),
    (checks.check_gpu_inventory, gpu_inventory),
    (checks.check_gpu_inventory, gpu_inventory_other_apis),
    (checks.check_gpu_inventory, with_entry_change(gpu_inventory_tuple)),
    (checks.check_gpu_inventory, gpu_inventory_raises_without_gpu),
]


@pytest.mark.parametrize("check, answer", CASES)
@pytest.mark.parametrize("hidden, seed", [(False, 0), (True, 1), (True, 42)])
def test_probe_source_is_self_contained(check, answer, hidden, seed):
    inputs, remote, local = both_ways(check, (answer,), seed, hidden)
    assert remote == local
    assert verdict(check, inputs, remote) == verdict(check, inputs, local)
