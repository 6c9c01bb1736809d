"""Right alternatives: copied from tests/test_checks_lesson06.py, and own."""
from __future__ import annotations

import torch
from torch.nn.utils import clip_grad_norm_

from course_utils import precision


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


ALTERNATIVES = [step_loss_outside_in_float32, step_plain_path_without_scaling,
                step_with_course_utils, step_zeroing_at_the_end, step_imported_names]
