"""Tests of the check course_utils/checks/lesson00/gpu_inventory.py."""
from __future__ import annotations

import json

import pytest
import torch

from course_utils import checks
from course_utils.checks import machines

from ...probe_roundtrip import HIDDEN_SEEDS, failure, passes
from ...solutions import solution

gpu_inventory = solution("00_setup", "gpu_inventory")


# ------------------------------------------------------------------ gpu_inventory

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
        for entry, index in zip(inventory, range(len(inventory)), strict=True):
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
    (gpu_inventory_gb, "divide bytes by 2**30 (GiB), not by 1e9 (GB)."),
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
    assert message.startswith("On a server with an H100 and an A100 (simulated)")


def test_gpu_inventory_capability_tuple_names_the_value():
    message = failure(checks.check_gpu_inventory, with_entry_change(gpu_inventory_tuple))
    assert "capability is [9, 0]" in message


@pytest.mark.parametrize("answer", [gpu_inventory_crashes_without_gpu,
                                    gpu_inventory_raises_without_gpu])
def test_gpu_inventory_crashing_without_a_gpu(answer):
    message = failure(checks.check_gpu_inventory, answer)
    assert message.startswith("On a laptop with no GPU (simulated), gpu_inventory() raised")
    assert "return [] without asking for device properties." in message


def test_gpu_inventory_wrong_count():
    message = failure(checks.check_gpu_inventory, gpu_inventory_first_only)
    assert ("returned 1 entries for 2 GPU(s), the number torch.cuda.device_count() reports "
            "there: no entry has the index 1, the indices being 0 to 1.") in message
    assert "range(torch.cuda.device_count())" in message


def test_gpu_inventory_not_a_list():
    assert "is a dict, not a list" in failure(checks.check_gpu_inventory, gpu_inventory_dict)


def test_gpu_inventory_not_implemented():
    assert "not implemented yet" in failure(checks.check_gpu_inventory, gpu_inventory_not_done)


def test_gpu_inventory_hidden_messages_do_not_reveal_answers():
    for seed in HIDDEN_SEEDS:
        message = failure(checks.check_gpu_inventory, with_entry_change(gpu_inventory_gb),
                          hidden=True, seed=seed)
        for spec in checks.check_gpu_inventory.make_inputs(seed, True)["machines"]:
            for gpu in machines.gpus(spec):
                assert f"{gpu['total_memory'] / 2**30:.2f}" not in message


def test_hidden_inputs_depend_on_the_seed():
    made = [checks.check_gpu_inventory.make_inputs(seed, True) for seed in HIDDEN_SEEDS]
    assert len({json.dumps(inputs) for inputs in made}) > 1
