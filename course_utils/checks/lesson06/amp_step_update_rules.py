"""amp_step's rules on the update itself: the optimizer's step, clipping and the scaler's
sequence (each symptom with the causes the call log tells apart), and the weights."""
from __future__ import annotations

import math

from ...probe import build_mlp, parameter_values
from ..framework import expect_close, fail
from .amp_step_rules import ORDER, OVERFLOW_SCALE, reference_step


def expect_the_step(drawn: dict, seen: dict, start: list | None, where: str,
                    hidden: bool) -> None:
    """The step from ``start`` (the weights the previous call left; None: the drawn model)."""
    reference, steps = reference_step(drawn, start), seen["steps"]
    if drawn["init_scale"] == OVERFLOW_SCALE and steps:
        fail(f"{where}, the scaled gradients overflowed, yet optimizer.step() ran on them.",
             "step with scaler.step(optimizer): it skips the step when a gradient is inf.")
    if drawn["init_scale"] != OVERFLOW_SCALE and len(steps) != 1:
        fail(f"{where}, optimizer.step() ran {len(steps)} times.", "scaler.step(optimizer) "
             "calls optimizer.step() itself: call one of them, once.")
    if steps:
        _expect_clipped(steps[0]["norm"], drawn, seen, reference["norm"], where)
    if seen["returned"]["type"] != "float":
        fail(f"{where}, amp_step returned {seen['returned']['type']!r}.", "return loss.item().")
    expect_close(seen["returned"]["value"], reference["loss"], f"{where}, the loss amp_step "
                 "returned", "return loss.item() of the unscaled loss.", rel=0.03, abs_tol=0.02,
                 reveal=not hidden)
    before = start or parameter_values(build_mlp(drawn["model"]))
    after, expected = _flat(seen["params"]), _flat(reference["params"])
    update = math.dist(_flat(before), expected)
    # bfloat16 keeps 8 bits of mantissa: a right step lands up to 15 % of the update away
    # (measured over 80 draws); a step not clipped, or clipped while scaled, lands 100 % away.
    tolerance = 0.3 if drawn["dtype"] == "bfloat16" else 0.1
    if not all(map(math.isfinite, after)) or math.dist(after, expected) > tolerance * update + 1e-6:
        fail(f"{where}, the weights after the step are not those of a float32 step clipped to "
             "max_norm.", ORDER)


def _flat(values) -> list[float]:
    return [x for v in values for x in (_flat(v) if isinstance(v, list) else [v])]


def _before(log: list, first: str, then: str) -> bool:
    """``first`` happened, and before any ``then``."""
    return first in log and (then not in log or log.index(first) < log.index(then))


def _expect_clipped(norm: float | None, drawn: dict, seen: dict, unclipped: float,
                    where: str) -> None:
    target, log, scale = drawn["max_norm"], seen["log"], drawn["init_scale"]
    if norm is not None and abs(norm - target) <= 0.05 * target:
        return
    step_at = log.index("optimizer.step") if "optimizer.step" in log else len(log)
    if norm == 0:
        wiped = "zero_grad" in log[log.index("backward"):step_at]
        fail(f"{where}, the gradients were all zero (or None) at optimizer.step()" + (
             ": zero_grad() ran between backward() and the step." if wiped else "."),
             "zero the gradients before backward() (or after the step), never between them.")
    if norm is None:
        fail(f"{where}, optimizer.step() ran on gradients that were not finite.", ORDER)
    if drawn["scaler"] and norm < target / 10:
        _expect_unscaled_once(norm, target, scale, log, seen["clips"], unclipped, where)
    if drawn["scaler"] and norm > 10 * unclipped:
        fail(f"{where}, optimizer.step() ran on gradients still multiplied by the scale.", ORDER)
    if abs(norm - unclipped) <= 0.05 * unclipped:
        late = "clip" in log and _before(log, "optimizer.step", "clip")
        fail(f"{where}, at optimizer.step() the gradients' norm was {norm / target:.2g} times "
             "max_norm: they were not clipped before the step" + (
                 " (clip_grad_norm_ ran after it)." if late else "."),
             "call torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm) after "
             "scaler.unscale_ and before the step.")
    fail(f"{where}, the gradient norm at the step was {norm:.4g}, not max_norm.",
         "clip with clip_grad_norm_(model.parameters(), max_norm) after scaler.unscale_.")


def _expect_unscaled_once(norm: float, target: float, scale: float, log: list, clips: list,
                          unclipped: float, where: str) -> None:
    """The gradients at the step were far below max_norm: which part of the sequence did it."""
    seen = f"at the step their norm was max_norm / {target / norm:.3g}"
    if _before(log, "scaler.update", "scaler.step"):
        fail(f"{where}, scaler.update() ran before scaler.step(): update() forgets that the "
             "gradients were already unscaled, so scaler.step() divided them by the scale a "
             f"second time ({seen}; the scale is {scale:g}).", ORDER)
    if (clips and clips[0]["norm"] is not None and clips[0]["norm"] > 10 * unclipped) or \
            _before(log, "clip", "scaler.unscale_"):
        fail(f"{where}, the gradients were clipped while still scaled (clip_grad_norm_ ran "
             f"before scaler.unscale_), then unscaled: {seen}, and the scale is {scale:g}.",
             "call scaler.unscale_(optimizer) before clip_grad_norm_.")
    if abs(target / norm / scale - 1) <= 0.05:
        fail(f"{where}, at the step the gradients' norm was max_norm divided by the scale "
             f"({scale:g}): they were clipped to max_norm while still scaled, then unscaled.",
             "call scaler.unscale_(optimizer) before clip_grad_norm_.")
    fail(f"{where}, at the step the gradients' norm was {norm:.3g}, {target / norm:.3g} times "
         "smaller than max_norm.", ORDER)
