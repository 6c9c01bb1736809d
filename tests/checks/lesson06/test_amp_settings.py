"""Tests of the check course_utils/checks/lesson06/amp_settings.py."""
from __future__ import annotations

import pytest
import torch

from course_utils import checks, precision

from ...probe_roundtrip import failure, passes
from .shared import amp_settings

# ------------------------------------------------------------------ amp_settings

def settings_by_capability(device):
    """Right: the compute capability instead of is_bf16_supported."""
    old_gpu = device.type == "cuda" and torch.cuda.get_device_capability(device) < (8, 0)
    dtype = torch.float16 if old_gpu else torch.bfloat16
    return dtype, torch.amp.GradScaler(device.type, enabled=old_gpu)


def settings_with_course_utils(device):
    """Right: the course's policy (float16 with a scaler on a Mac it cannot verify)."""
    policy = precision.amp_policy(device)
    return policy.dtype, policy.make_scaler()


def settings_asks_macos(device):
    """Right: bfloat16 on MPS only on macOS 14+, else float16 with a scaler."""
    if device.type == "mps" and not torch.backends.mps.is_macos_or_newer(14, 0):
        return torch.float16, torch.amp.GradScaler("mps")
    return amp_settings(device)


def settings_float16_everywhere(device):  # the source material's choice
    return torch.float16, torch.amp.GradScaler(device.type)


def settings_bfloat16_everywhere(device):
    return torch.bfloat16, torch.amp.GradScaler(device.type, enabled=False)


def settings_default_bf16_query(device):
    emulated_ok = device.type == "cuda" and not torch.cuda.is_bf16_supported()
    dtype = torch.float16 if emulated_ok else torch.bfloat16
    return dtype, torch.amp.GradScaler(device.type, enabled=dtype == torch.float16)


def settings_scaler_always_enabled(device):
    dtype, _ = amp_settings(device)
    return dtype, torch.amp.GradScaler(device.type)


def settings_scaler_on_cpu(device):
    """Thinks the CPU needs loss scaling: a scaler with bfloat16 on the CPU."""
    dtype, scaler = amp_settings(device)
    return dtype, torch.amp.GradScaler("cpu") if device.type == "cpu" else scaler


def settings_no_scaler_object(device):
    dtype, scaler = amp_settings(device)
    return dtype, scaler if scaler.is_enabled() else None


def settings_deprecated_scaler(device):
    dtype, scaler = amp_settings(device)
    return dtype, torch.cuda.amp.GradScaler() if scaler.is_enabled() else scaler


def settings_disabled_float16_scaler(device):
    dtype, _ = amp_settings(device)
    return dtype, torch.amp.GradScaler(device.type, enabled=False)


def settings_scaler_on_the_cpu_device(device):
    dtype, scaler = amp_settings(device)
    return dtype, torch.amp.GradScaler("cpu", enabled=scaler.is_enabled())


def settings_string_dtype(device):
    dtype, scaler = amp_settings(device)
    return str(dtype).removeprefix("torch."), scaler


def settings_dtype_only(device):
    return amp_settings(device)[0]


def settings_float32(device):
    return torch.float32, torch.amp.GradScaler(device.type, enabled=False)


def settings_not_done(device):
    raise NotImplementedError()


def settings_in_the_device_context(device):
    """Right: is_bf16_supported asked with `device` made current for the question."""
    if device.type != "cuda":
        return torch.bfloat16, torch.amp.GradScaler(device.type, enabled=False)
    with torch.cuda.device(device):
        native = torch.cuda.is_bf16_supported(including_emulation=False)
    dtype = torch.bfloat16 if native else torch.float16
    return dtype, torch.amp.GradScaler("cuda", enabled=not native)


def settings_by_properties(device):
    """Right: the device's properties, a match statement, and a scaler made in one place."""
    match device.type:
        case "cuda" if torch.cuda.get_device_properties(device).major < 8:
            dtype = torch.float16
        case _:
            dtype = torch.bfloat16
    use_scaler = dtype is torch.float16
    return dtype, torch.amp.GradScaler(device=device.type, enabled=use_scaler)


def settings_from_the_machine(device):
    """Wrong: asks whether the machine has an old GPU, not whether `device` is one."""
    old_gpu = torch.cuda.is_available() and not torch.cuda.is_bf16_supported(
        including_emulation=False)
    dtype = torch.float16 if old_gpu else torch.bfloat16
    return dtype, torch.amp.GradScaler(device.type, enabled=old_gpu)


def settings_of_the_first_gpu(device):
    """Wrong: asks GPU 0 whatever `device` is."""
    old_gpu = device.type == "cuda" and torch.cuda.get_device_capability(0) < (8, 0)
    dtype = torch.float16 if old_gpu else torch.bfloat16
    return dtype, torch.amp.GradScaler(device.type, enabled=old_gpu)


@pytest.mark.parametrize("answer", [amp_settings, settings_by_capability,
                                    settings_with_course_utils, settings_asks_macos,
                                    settings_in_the_device_context, settings_by_properties],
                         ids=lambda f: f.__name__)
def test_amp_settings_right_answers_keep_full_marks(answer, capsys):
    passes(checks.check_amp_settings, answer)
    printed = capsys.readouterr().out
    assert ("bfloat16 with a disabled GradScaler on: a Linux machine with one NVIDIA H100 (cuda); "
            "a laptop with no GPU (cpu); a cloud VM with one Tesla T4 (cpu); a server with a Tesla"
            " T4 as cuda:0 and an A100 as cuda:1 (cuda:1); float16 with an enabled GradScaler "
            "on: a cloud VM with one Tesla T4 (cuda) (simulated).") in printed
    assert "a Mac with Apple silicon (MPS)" in printed  # the hidden part tests a Mac
    assert "an A100 as cuda:0 and a Tesla T4 as cuda:1 (cuda:1)" in printed


def test_amp_settings_precision_follows_the_device_not_the_machine():
    message = failure(checks.check_amp_settings, settings_from_the_machine)
    assert message.startswith("On a cloud VM with one Tesla T4 (simulated), amp_settings("
                              "torch.device('cpu')) chose float16 for 'cpu' here, and bfloat16 "
                              "for 'cpu' on a machine without a GPU: it followed the machine")
    assert "decide from device.type" in message


def test_amp_settings_second_gpu_is_asked_about():
    message = failure(checks.check_amp_settings, settings_of_the_first_gpu)
    assert message.startswith("On a server with a Tesla T4 as cuda:0 and an A100 as cuda:1 "
                              "(simulated), amp_settings(torch.device('cuda:1')) chose float16")
    assert "(cuda:1; cuda:0 is the Tesla T4)" in message
    assert "torch.cuda.get_device_capability(device)" in message
    hidden = failure(checks.check_amp_settings, settings_of_the_first_gpu, hidden=True, seed=0)
    assert "chose bfloat16, but a T4 (compute capability 7.5) has no bfloat16 units (cuda:1; " \
        "cuda:0 is the NVIDIA A100" in hidden


def test_amp_settings_visible_success_line_names_only_what_was_tested(capsys):
    checks.check_amp_settings(amp_settings)
    line = capsys.readouterr().out
    assert "H100" in line and "T4" in line and "no GPU" in line and "MPS" not in line


def test_amp_settings_float16_everywhere_is_told_about_bfloat16():
    message = failure(checks.check_amp_settings, settings_float16_everywhere)
    assert message.startswith("On a Linux machine with one NVIDIA H100 (simulated), "
                              "amp_settings(torch.device('cuda')) chose float16")
    assert "has bfloat16 units" in message and "needs no GradScaler" in message


def test_amp_settings_bfloat16_on_a_t4():
    message = failure(checks.check_amp_settings, settings_bfloat16_everywhere)
    assert message.startswith("On a cloud VM with one Tesla T4 (simulated)")
    assert "no bfloat16 units" in message
    assert "counts emulation" not in message  # it never asked is_bf16_supported()


def test_amp_settings_default_is_bf16_supported_is_named():
    message = failure(checks.check_amp_settings, settings_default_bf16_query)
    assert "torch.cuda.is_bf16_supported() says True here because by default it counts " \
           "emulation" in message
    assert "is_bf16_supported(including_emulation=False)" in message


def test_amp_settings_scaler_with_bfloat16_is_pointless():
    message = failure(checks.check_amp_settings, settings_scaler_always_enabled)
    assert "an enabled GradScaler with bfloat16: pointless" in message
    assert "enabled=(dtype == torch.float16)" in message


def test_amp_settings_scaler_with_bfloat16_on_the_cpu():
    message = failure(checks.check_amp_settings, settings_scaler_on_cpu)
    assert message.startswith("On a laptop with no GPU (simulated)")
    assert "pointless" in message and "float32's" in message


def test_amp_settings_missing_scaler_object():
    message = failure(checks.check_amp_settings, settings_no_scaler_object)
    assert "returned 'NoneType' as the scaler" in message
    assert "enabled=False where no scaling is needed" in message


def test_amp_settings_deprecated_torch_cuda_amp_scaler():
    message = failure(checks.check_amp_settings, settings_deprecated_scaler)
    assert "deprecated torch.cuda.amp.grad_scaler" in message
    assert "torch.amp.GradScaler(device.type" in message


def test_amp_settings_float16_without_scaling():
    message = failure(checks.check_amp_settings, settings_disabled_float16_scaler)
    assert "float16 with a disabled GradScaler" in message and "underflow" in message


def test_amp_settings_scaler_for_another_device():
    message = failure(checks.check_amp_settings, settings_scaler_on_the_cpu_device)
    assert "a GradScaler for 'cpu', not 'cuda'" in message


@pytest.mark.parametrize("answer, expected", [
    (settings_string_dtype, "return the dtype object"),
    (settings_dtype_only, "not a pair (dtype, scaler)"),
    (settings_float32, "autocast computes in float16 or bfloat16"),
    (settings_not_done, "is not implemented yet"),
])
def test_amp_settings_other_mistakes(answer, expected):
    assert expected in failure(checks.check_amp_settings, answer)


def test_amp_settings_leaves_no_warning_behind(recwarn):
    with pytest.raises(checks.CheckFailure):
        checks.check_amp_settings(settings_deprecated_scaler)
    assert len(recwarn) == 0


# ------------------------------------------------------------------ on a real GPU

@pytest.mark.gpu
def test_amp_settings_solution_on_the_real_gpu_agrees_with_the_course_policy():
    dtype, scaler = amp_settings(torch.device("cuda"))
    policy = precision.amp_policy("cuda")
    assert dtype == policy.dtype and scaler.is_enabled() is policy.use_scaler
