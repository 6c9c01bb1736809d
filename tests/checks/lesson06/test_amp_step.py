"""Tests of the check course_utils/checks/lesson06/amp_step.py."""
from __future__ import annotations

import contextlib

import pytest
import torch
from torch.nn.utils import clip_grad_norm_

from course_utils import checks, precision
from course_utils.checks import machines
from course_utils.probe import SimulatedMachine

from ...probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from ...solutions import solution
from .shared import amp_settings

amp_step = solution("06_mixed_precision", "amp_step")
T4 = machines.machine("a cloud VM with one Tesla T4", {"cuda": ["T4"]})


# ------------------------------------------------------------------ the simulated machines

@pytest.mark.parametrize("spec, default, native", [
    (machines.CUDA, True, True), (T4, True, False), (machines.CPU, False, False)])
def test_simulated_bf16_support_answers_like_torch(spec, default, native):
    """torch.cuda.is_bf16_supported() counts emulated bfloat16 by default: True on a T4."""
    with SimulatedMachine(spec):
        assert torch.cuda.is_bf16_supported() is default
        assert torch.cuda.is_bf16_supported(including_emulation=False) is native


def test_a_simulated_mac_runs_a_macos_with_bfloat16():
    with SimulatedMachine(machines.MPS):
        assert torch.backends.mps.is_macos_or_newer(14, 0)
        assert not torch.backends.mps.is_macos_or_newer(99, 0)
    with SimulatedMachine(machines.CPU):
        assert not torch.backends.mps.is_macos_or_newer(14, 0)


# ------------------------------------------------------------------ amp_step

def step_loss_outside_in_float32(model, features, labels, loss_fn, optimizer, scaler, dtype,
                                 max_norm):
    """Right: only the model under autocast, the loss on float32 logits."""
    optimizer.zero_grad(set_to_none=False)
    with torch.amp.autocast(device_type=features.device.type, dtype=dtype):
        logits = model(features)
    loss = loss_fn(logits.float(), labels)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, foreach=True)
    scaler.step(optimizer)
    scaler.update()
    return float(loss.item())


def step_plain_path_without_scaling(model, features, labels, loss_fn, optimizer, scaler, dtype,
                                    max_norm):
    """Right: a branch for the disabled scaler that never touches it."""
    model.zero_grad()
    with torch.autocast(features.device.type, dtype=dtype):
        loss = loss_fn(model(features), labels)
    if not scaler.is_enabled():
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        return loss.item()
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def step_with_course_utils(model, features, labels, loss_fn, optimizer, scaler, dtype, max_norm):
    policy = precision.AmpPolicy(features.device.type, dtype, scaler.is_enabled(), "test")
    return precision.amp_step(model, features, labels, loss_fn, optimizer, scaler, policy,
                              max_norm)


def make_step(  # noqa: C901 - one switch per mistake of the catalogue, each a plain branch
        zero=True, autocast="right", loss="inside", backward_inside=False, scale=True,
        unscale="before_clip", clip=True, step="scaler", update=True, returns="item",
        own_scaler=False):
    """The solution's step with one thing changed."""
    def step_fn(  # noqa: C901 - the solution's step, with each switch above as a plain branch
            model, features, labels, loss_fn, optimizer, scaler, dtype, max_norm):
        if own_scaler:
            scaler = torch.amp.GradScaler("cpu")  # a scaler with bfloat16 on the CPU
        if zero:
            optimizer.zero_grad()
        contexts = {"right": lambda: torch.autocast(features.device.type, dtype=dtype),
                    "cuda": lambda: torch.autocast("cuda", dtype=dtype),
                    "torch.cuda.amp": lambda: torch.cuda.amp.autocast(dtype=dtype),
                    "no dtype": lambda: torch.autocast(features.device.type),
                    "disabled": lambda: torch.autocast(features.device.type, enabled=False),
                    "none": contextlib.nullcontext}
        inputs = features.to(dtype) if autocast == "cast by hand" else features
        if autocast == "cast by hand":
            model.to(dtype)
        with contexts.get(autocast, contexts["none"])():
            logits = model(inputs)
            loss_value = loss_fn(logits, labels) if loss == "inside" else None
            if backward_inside:
                (scaler.scale(loss_value) if scale else loss_value).backward()
        if loss_value is None:
            loss_value = loss_fn(logits, labels)
        if not backward_inside:
            (scaler.scale(loss_value) if scale else loss_value).backward()
        if unscale == "before_clip":
            scaler.unscale_(optimizer)
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        if step == "scaler":
            scaler.step(optimizer)
        elif step == "both":
            scaler.step(optimizer)
            optimizer.step()
        elif step == "optimizer":
            optimizer.step()
        if update:
            scaler.update()
        return {"item": lambda: loss_value.item(), "tensor": lambda: loss_value,
                "scaled": lambda: scaler.scale(loss_value).item()}[returns]()
    return step_fn


def step_not_done(model, features, labels, loss_fn, optimizer, scaler, dtype, max_norm):
    raise NotImplementedError()


def step_zeroing_at_the_end(model, features, labels, loss_fn, optimizer, scaler, dtype,
                            max_norm):
    """Right: zero the gradients after the step (lesson 07's convention), the device type
    from the model's parameters."""
    with torch.autocast(device_type=next(model.parameters()).device.type, dtype=dtype):
        loss = loss_fn(model(features), labels)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    model.zero_grad(set_to_none=False)
    return loss.item()


def step_imported_names(model, features, labels, loss_fn, optimizer, scaler, dtype, max_norm):
    """Right: clip_grad_norm_ imported by name (the check does not see the call), and the
    device type given as a keyword from the labels."""
    for parameter in model.parameters():
        parameter.grad = None
    with torch.autocast(device_type=labels.device.type, dtype=dtype, enabled=True):
        logits = model(features)
        loss = loss_fn(logits, labels)
    scaled = scaler.scale(loss)
    scaled.backward()
    scaler.unscale_(optimizer)
    clip_grad_norm_(model.parameters(), max_norm=max_norm)
    scaler.step(optimizer)
    scaler.update()
    return float(loss)


RIGHT_STEPS = [amp_step, step_loss_outside_in_float32, step_plain_path_without_scaling,
               step_with_course_utils, step_zeroing_at_the_end, step_imported_names]


@pytest.mark.parametrize("answer", RIGHT_STEPS, ids=lambda f: f.__name__)
def test_amp_step_right_answers_keep_full_marks(answer, capsys):
    passes(checks.check_amp_step, answer, seeds=HIDDEN_SEEDS[:2 if answer is amp_step else 1])
    printed = capsys.readouterr().out
    assert ("with: bfloat16 with a disabled GradScaler (a Linux machine with one NVIDIA H100, "
            "the batch on its CPU); float16 with an enabled GradScaler.") in printed
    assert "float16 whose scaled gradients overflow (the step must be skipped)" in printed
    assert "called 2 times with the same model, optimizer and scaler" in printed


WRONG_STEPS = {
    # The list.
    "clipping before unscale": (make_step(unscale="never"),
                                "clipped while still scaled", "unscale_(optimizer) before clip"),
    "torch.cuda.amp used": (make_step(autocast="torch.cuda.amp"),
                            "deprecated torch.cuda.amp.autocast", "FutureWarning"),
    "backward inside autocast": (make_step(backward_inside=True),
                                 "backward() ran inside the autocast block", "outside it"),
    "a scaler with bfloat16 on the CPU that never steps": (
        make_step(own_scaler=True, step="optimizer", unscale="never", update=False),
        "created a GradScaler of its own", "use the `scaler` argument"),
    # More mistakes, each with its own hint.
    "scaler never steps": (make_step(step="optimizer"),
                           "never called scaler.step(optimizer)", "skips a step"),
    "scaler never updates": (make_step(update=False), "never called scaler.update()", "lowers"),
    "stepped twice": (make_step(step="both"), "optimizer.step() ran 2 times", "call one of them"),
    "loss not scaled": (make_step(scale=False),
                        "raised AssertionError: Attempted unscale_ but _scale is None",
                        "call, in this order: scaler.scale(loss).backward()"),
    "loss not scaled, nothing unscaled": (make_step(scale=False, unscale="never", clip=False,
                                                    step="optimizer", update=False),
                                          "backward() ran on an unscaled loss",
                                          "scaler.scale(loss).backward()"),
    "not clipped": (make_step(clip=False), "max_norm: they were not clipped before the step.",
                    "clip_grad_norm_(model.parameters(), max_norm)"),
    "no autocast": (make_step(autocast="none"), "ran without autocast, in float32",
                    "torch.autocast(features.device.type"),
    "autocast disabled": (make_step(autocast="disabled"), "ran without autocast, in float32",
                          "torch.autocast(features.device.type"),
    "cast by hand": (make_step(autocast="cast by hand"), "on a batch cast to bfloat16 by hand",
                     "leave the model and the batch in float32"),
    "autocast for cuda on cpu data": (make_step(autocast="cuda"),
                                      "under autocast for 'cuda', but the batch is on the CPU",
                                      "features.device.type"),
    "loss outside on reduced logits": (make_step(loss="outside"),
                                       "loss was computed in torch.bfloat16", "logits.float()"),
    "no zero_grad": (make_step(zero=False),
                     ("in call 2 (the same model, optimizer and scaler), the gradients of the "
                      "previous call were still there"),
                     "zero_grad() at the start of the step (or after scaler.update(), at its end)"),
    "returns a tensor": (make_step(returns="tensor"), "returned 'Tensor'", "loss.item()"),
    "returns the scaled loss": (make_step(returns="scaled"), "the loss amp_step returned",
                                "unscaled loss"),
}


def _rest_of_the_step(scaler, optimizer, model, max_norm, loss):
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def step_autocast_for_the_cpu(model, features, labels, loss_fn, optimizer, scaler, dtype,
                              max_norm):
    """Wrong on a GPU: works on the CPU, where it was tried, and autocasts nothing on a GPU."""
    optimizer.zero_grad()
    with torch.autocast("cpu", dtype=dtype):
        loss = loss_fn(model(features), labels)
    return _rest_of_the_step(scaler, optimizer, model, max_norm, loss)


def step_autocast_by_the_machine(model, features, labels, loss_fn, optimizer, scaler, dtype,
                                 max_norm):
    """Wrong: autocast's device from the machine, not from the data."""
    optimizer.zero_grad()
    device_type = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.autocast(device_type, dtype=dtype):
        loss = loss_fn(model(features), labels)
    return _rest_of_the_step(scaler, optimizer, model, max_norm, loss)


def step_updating_before_the_step(model, features, labels, loss_fn, optimizer, scaler, dtype,
                                  max_norm):
    """Wrong: scaler.update() before scaler.step(): step unscales a second time."""
    optimizer.zero_grad()
    with torch.autocast(features.device.type, dtype=dtype):
        loss = loss_fn(model(features), labels)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    scaler.update()
    scaler.step(optimizer)
    return loss.item()


def step_clipping_after_the_step(model, features, labels, loss_fn, optimizer, scaler, dtype,
                                 max_norm):
    optimizer.zero_grad()
    with torch.autocast(features.device.type, dtype=dtype):
        loss = loss_fn(model(features), labels)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    return loss.item()


def step_zeroing_before_the_step(model, features, labels, loss_fn, optimizer, scaler, dtype,
                                 max_norm):
    """Wrong: zero_grad() between backward and the step (meant as "before the update")."""
    with torch.autocast(features.device.type, dtype=dtype):
        loss = loss_fn(model(features), labels)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.zero_grad()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def step_unscaling_after_an_unseen_clip(model, features, labels, loss_fn, optimizer, scaler,
                                        dtype, max_norm):
    """Wrong: clips, then unscales; clip_grad_norm_ imported by name before the check ran, so
    only the numbers show it."""
    optimizer.zero_grad()
    with torch.autocast(features.device.type, dtype=dtype):
        loss = loss_fn(model(features), labels)
    scaler.scale(loss).backward()
    clip_grad_norm_(model.parameters(), max_norm)
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
    return loss.item()


def step_scaling_only_on_a_gpu_machine(model, features, labels, loss_fn, optimizer, scaler,
                                       dtype, max_norm):
    """Wrong: uses the scaler only where the machine has CUDA, not where `scaler` is enabled."""
    optimizer.zero_grad()
    with torch.autocast(features.device.type, dtype=dtype):
        loss = loss_fn(model(features), labels)
    if torch.cuda.is_available():
        return _rest_of_the_step(scaler, optimizer, model, max_norm, loss)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    optimizer.step()
    return loss.item()


WRONG_STEPS.update({
    "scaler only on a GPU machine": (step_scaling_only_on_a_gpu_machine,
                                     ("float16 with an enabled GradScaler: With dtype=torch.float16"
                                     " and an enabled GradScaler, backward() ran on an unscaled "
                                     "loss"), "scaler.scale(loss).backward()"),
    # GPU-only mistakes, seen on the simulated GPU machine or in the code of the call.
    "autocast written for the cpu": (
        step_autocast_for_the_cpu,
        "autocast's device type is written into the code (`with torch.autocast(\"cpu\"",
        "torch.autocast(features.device.type"),
    "autocast by the machine": (
        step_autocast_by_the_machine,
        ("(a Linux machine with one NVIDIA H100, the batch on its CPU): With dtype=torch.bfloat16"
         " and a disabled GradScaler, the forward pass ran under autocast for 'cuda', but the "
         "batch is on the CPU"),
        "features.device.type"),
    # Faults in the scaler's sequence that all leave small or unclipped gradients at the step.
    "update before step": (step_updating_before_the_step,
                           "scaler.update() ran before scaler.step(): update() forgets",
                           "scaler.step(optimizer), scaler.update()"),
    "clip after the step": (step_clipping_after_the_step,
                            "they were not clipped before the step (clip_grad_norm_ ran after it)",
                            "before the step"),
    "zero_grad before the step": (
        step_zeroing_before_the_step,
        ("the gradients were all zero (or None) at optimizer.step(): zero_grad() ran between "
         "backward() and the step"),
        "never between them"),
    "unscale after an unseen clip": (
        step_unscaling_after_an_unseen_clip,
        ("the gradients' norm was max_norm divided by the scale (256): they were clipped to "
         "max_norm while still scaled"),
        "scaler.unscale_(optimizer) before clip_grad_norm_"),
})


@pytest.mark.parametrize("name", list(WRONG_STEPS))
def test_amp_step_mistakes_get_their_own_hint(name):
    answer, cause, fix = WRONG_STEPS[name]
    message = failure(checks.check_amp_step, answer)
    assert cause in message and fix in message


def test_amp_step_autocast_without_dtype_fails_the_float16_case():
    message = failure(checks.check_amp_step, make_step(autocast="no dtype"))
    assert message.startswith("✘ float16 with an enabled GradScaler: With dtype=torch.float16")
    assert "autocast computed in another dtype" in message and "dtype=dtype" in message
    assert "✔ passed: bfloat16 with a disabled GradScaler" in message


def test_amp_step_overflow_case_needs_scaler_step():
    """A step that unscales, clips and calls scaler.update() but steps the optimizer itself."""
    def step_fn(model, features, labels, loss_fn, optimizer, scaler, dtype, max_norm):
        optimizer.zero_grad()
        with torch.autocast(features.device.type, dtype=dtype):
            loss = loss_fn(model(features), labels)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(optimizer) if scaler.get_scale() < 2.0**30 else optimizer.step()
        scaler.update()
        return loss.item()
    checks.check_amp_step(step_fn)  # the visible cases do not overflow
    message = failure(checks.check_amp_step, step_fn, hidden=True, seed=7)
    assert message.startswith("✘ float16 whose scaled gradients overflow (the step must be "
                              "skipped): With dtype=torch.float16 and an enabled GradScaler, "
                              "amp_step never called scaler.step(optimizer)")
    assert "✔ passed: bfloat16 with a disabled GradScaler (a Linux machine with one NVIDIA " \
        "H100, the batch on its CPU); float16 with an enabled" in message


def test_amp_step_stepping_twice_steps_on_overflowed_gradients():
    message = failure(checks.check_amp_step, make_step(step="both"), hidden=True, seed=1)
    assert "the scaled gradients overflowed, yet optimizer.step() ran on them" in message
    assert "it skips the step when a gradient is inf" in message


def test_amp_step_model_cast_to_float16_is_told_to_keep_float32():
    message = failure(checks.check_amp_step, make_step(autocast="cast by hand"))
    assert "raised ValueError: Attempting to unscale FP16 gradients" in message
    assert "keep the model in float32 (no model.half() or model.to(dtype))" in message


@pytest.mark.parametrize("answer, visible, hidden", [
    (make_step(unscale="never"), 1 / 2, 2 / 3),  # harmless with bfloat16 or a skipped step
    (make_step(step="optimizer"), 1 / 2, 1 / 3),
    (make_step(backward_inside=True), 0, 0),
    (make_step(zero=False), 0, 0),
])
def test_amp_step_partial_credit_per_setting(answer, visible, hidden):
    assert graded(checks.check_amp_step, (answer,), hidden=False, seed=0).fraction == \
        pytest.approx(visible)
    for seed in HIDDEN_SEEDS[:2]:
        assert graded(checks.check_amp_step, (answer,), hidden=True, seed=seed).fraction == \
            pytest.approx(hidden)


def test_amp_step_not_implemented():
    assert "amp_step(...) is not implemented yet" in failure(checks.check_amp_step, step_not_done)


def test_amp_step_hidden_messages_do_not_reveal_the_expected_loss():
    for seed in HIDDEN_SEEDS[:2]:
        message = failure(checks.check_amp_step, make_step(returns="scaled"), hidden=True,
                          seed=seed)
        assert "expected about" not in message
    assert "expected about" in failure(checks.check_amp_step, make_step(returns="scaled"))


def test_amp_step_inputs_make_clipping_bite():
    """max_norm is half the true gradient norm, so an unclipped step is told apart."""
    from course_utils.checks.lesson06.amp_step_rules import reference_steps

    for seed in HIDDEN_SEEDS:
        for drawn in checks.check_amp_step.make_inputs(seed, True)["cases"]:
            unclipped = [step["norm"] for step in reference_steps(
                {key: value for key, value in drawn.items() if key != "max_norm"})]
            assert min(unclipped) == pytest.approx(2 * drawn["max_norm"], rel=1e-4)
            assert max(unclipped) < 100 * drawn["max_norm"]
            assert len(drawn["labels"]) == len(drawn["features"]) == 16


def test_amp_step_leaves_torch_unpatched_and_no_warning_behind(recwarn):
    backward, init = torch.autograd.backward, torch.amp.GradScaler.__init__
    autocast_init = torch.amp.autocast_mode.autocast.__init__
    with pytest.raises(checks.CheckFailure):
        checks.check_amp_step(make_step(autocast="torch.cuda.amp"))
    assert torch.autograd.backward is backward and torch.amp.GradScaler.__init__ is init
    assert torch.amp.autocast_mode.autocast.__init__ is autocast_init
    assert not torch.is_autocast_enabled("cpu")
    assert len(recwarn) == 0


@pytest.mark.gpu
def test_amp_step_solution_trains_on_the_real_gpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10)).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    dtype, scaler = amp_settings(torch.device("cuda"))
    features, labels = torch.randn(256, 64, device="cuda"), torch.randint(0, 10, (256,),
                                                                          device="cuda")
    losses = [amp_step(model, features, labels, torch.nn.functional.cross_entropy, optimizer,
                       scaler, dtype, max_norm=1.0) for _ in range(50)]
    assert all(isinstance(loss, float) for loss in losses) and losses[-1] < losses[0] / 2
    assert all(p.dtype == torch.float32 for p in model.parameters())


@pytest.mark.parametrize("seed", [30, 33, 72])
def test_the_solution_keeps_full_marks_on_draws_where_bfloat16_strays_most(seed):
    """bfloat16's rounding moved the solution's step up to 15 % of the update away from the
    float64 reference on these draws (the grader once gave the solution 2.67/4 on one)."""
    assert graded(checks.check_amp_step, (amp_step,), hidden=True, seed=seed).fraction == 1
