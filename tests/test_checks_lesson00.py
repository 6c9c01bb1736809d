"""Lesson 00 checks: right answers pass, each typical mistake gets its own hint."""
from __future__ import annotations

import json

import pytest
import torch

from course_utils import checks, get_device
from course_utils.checks import machines
from course_utils.probe import SimulatedMachine

from .probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from .solutions import solution

pick_device = solution("00_setup", "pick_device")
gpu_inventory = solution("00_setup", "gpu_inventory")


# ------------------------------------------------------------------ pick_device

def pick_device_with_accelerator_api():
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    return torch.device("cpu") if accelerator is None else torch.device(accelerator.type)


def pick_device_with_course_utils():
    return get_device()


def pick_device_missing_else_overwrites():  # the source material's bug, verbatim
    if torch.cuda.is_available():
        device = torch.device("cuda")
        device = torch.device("cpu")
    return device


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


def pick_device_asks_is_built_too():
    """Right: MPS needs both a build with MPS and a machine with it."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_built() and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def pick_device_current_cuda_device():
    """Right: the current CUDA device, by index."""
    if torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


DEVICE_AT_DEFINITION = torch.device("cpu")  # the notebook's `device`, on this machine


def pick_device_chosen_once():
    return DEVICE_AT_DEFINITION


def pick_device_asks_the_gpu_temperature():
    if torch.cuda.is_available() and torch.cuda.temperature() < 80:
        return torch.device("cuda")
    return torch.device("cpu")


RIGHT_PICKS = [pick_device, pick_device_with_accelerator_api, pick_device_with_course_utils,
               pick_device_asks_is_built_too, pick_device_current_cuda_device]


@pytest.mark.parametrize("answer", RIGHT_PICKS, ids=lambda f: f.__name__)
def test_pick_device_right_answers_keep_full_marks(answer, capsys):
    passes(checks.check_pick_device, answer)
    printed = capsys.readouterr().out
    assert "a Linux machine with one NVIDIA H100 → cuda; a laptop with no GPU → cpu." in printed
    assert "a Mac with Apple silicon (MPS) → mps" in printed  # the hidden part tests MPS


def test_pick_device_on_a_simulated_xpu_machine_accepts_the_rule_and_the_accelerator():
    """On an XPU machine the exercise's rule gives the CPU; torch.accelerator finds the XPU."""
    with SimulatedMachine(machines.XPU):
        assert pick_device() == torch.device("cpu")
        assert pick_device_with_accelerator_api() == torch.device("xpu")
        assert pick_device_with_course_utils() == torch.device("xpu", 0)
    assert machines.XPU in checks.check_pick_device.make_inputs(1, True)["machines"]
    for answer in (pick_device, pick_device_with_accelerator_api):
        assert graded(checks.check_pick_device, (answer,), hidden=True, seed=1).fraction == 1
    inputs = checks.check_pick_device.make_inputs(1, True)
    assert "Data Center GPU Max (XPU) → cpu or xpu" in checks.check_pick_device.success_line(
        inputs)


def test_pick_device_that_returns_the_xpu_on_a_cuda_machine_fails():
    def xpu_first():
        return torch.device("xpu") if torch.xpu.is_available() else torch.device("cpu")
    message = failure(checks.check_pick_device, xpu_first)
    assert "H100 (simulated), pick_device() returned 'cpu'; it should pick 'cuda'" in message


def test_the_visible_success_line_names_only_what_was_tested(capsys):
    checks.check_pick_device(pick_device)
    line = capsys.readouterr().out
    assert "H100 → cuda" in line and "no GPU → cpu" in line
    assert "MPS" not in line and "mps" not in line


def test_pick_device_leaves_torch_unpatched():
    real = {name: getattr(torch.cuda, name) for name in dir(torch.cuda)}
    real_accelerator = torch.accelerator.current_accelerator
    real_build = torch.version.cuda  # None on a CPU-only build, '13.0' on PyPI's Linux wheel
    checks.check_pick_device(pick_device, hidden=True, seed=3)
    assert {name: getattr(torch.cuda, name) for name in dir(torch.cuda)} == real
    assert torch.accelerator.current_accelerator is real_accelerator
    assert torch.version.cuda == real_build


def test_pick_device_missing_else_that_overwrites():
    message = failure(checks.check_pick_device, pick_device_missing_else_overwrites)
    assert message.startswith("On a Linux machine with one NVIDIA H100 (simulated), "
                              "pick_device() returned 'cpu'")
    assert "overwrites the choice" in message


def test_pick_device_missing_else_unbound():
    message = failure(checks.check_pick_device, pick_device_missing_else)
    assert message.startswith("On a laptop with no GPU (simulated), pick_device() raised "
                              "UnboundLocalError at line")
    assert "`return device`" in message
    assert "add the missing fallback, `return torch.device('cpu')`" in message


def test_pick_device_chosen_once_is_told_to_ask_when_called():
    message = failure(checks.check_pick_device, pick_device_chosen_once)
    assert "without asking torch anything" in message
    assert "every time it is called" in message
    assert "else" not in message


def test_a_query_the_simulation_does_not_cover_is_named():
    message = failure(checks.check_pick_device, pick_device_asks_the_gpu_temperature)
    assert "called torch.cuda.temperature(), which this check does not simulate" in message
    assert "simulated machines" in message


def test_pick_device_returning_a_string():
    message = failure(checks.check_pick_device, pick_device_string)
    assert "returned 'str', not a torch.device" in message
    assert "not a string or a bool" in message


def test_pick_device_returning_a_bool():
    assert "returned 'bool'" in failure(checks.check_pick_device, pick_device_bool)


def test_pick_device_mps_before_cuda_fails_the_hidden_part():
    checks.check_pick_device(pick_device_mps_first)  # the visible machines have no MPS
    message = failure(checks.check_pick_device, pick_device_mps_first, hidden=True, seed=0)
    assert "both CUDA and MPS (simulated)" in message and "returned 'mps'" in message
    assert "torch.cuda.is_available() first" in message


def test_pick_device_forgetting_mps_fails_the_hidden_part():
    message = failure(checks.check_pick_device, pick_device_cuda_only, hidden=True, seed=0)
    assert "a Mac with Apple silicon (MPS) (simulated)" in message
    assert "should pick 'mps'" in message


def test_pick_device_wrong_index():
    message = failure(checks.check_pick_device, pick_device_second_gpu)
    assert "'cuda:1'" in message and "index 0 or none" in message


def test_pick_device_not_implemented():
    message = failure(checks.check_pick_device, pick_device_not_done)
    assert message.startswith("On a Linux machine with one NVIDIA H100 (simulated), "
                              "pick_device() is not implemented yet")


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
    assert "returned 1 entries for 2 GPU(s)" in message
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


@pytest.mark.parametrize("answer", [pick_device_missing_else, pick_device_string,
                                    pick_device_mps_first])
def test_wrong_picks_score_zero_when_graded(answer):
    assert graded(checks.check_pick_device, (answer,), hidden=True, seed=1).fraction == 0
