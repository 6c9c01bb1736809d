"""Tests of the check course_utils/checks/lesson00/pick_device.py."""
from __future__ import annotations

import pytest
import torch

from course_utils import checks, get_device
from course_utils.checks import machines
from course_utils.probe import SimulatedMachine

from ...probe_roundtrip import failure, graded, passes
from ...solutions import solution

pick_device = solution("00_setup", "pick_device")


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


@pytest.mark.parametrize("answer", [pick_device_missing_else, pick_device_string,
                                    pick_device_mps_first])
def test_wrong_picks_score_zero_when_graded(answer):
    assert graded(checks.check_pick_device, (answer,), hidden=True, seed=1).fraction == 0
