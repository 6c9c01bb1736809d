"""accumulation_step's rules on the weights: one SGD step on the mean loss of the micro-batches,
computed on the trusted side, and the weights each typical mistake gives instead."""
from __future__ import annotations

from typing import Any

from ...probe import build_mlp, parameter_values
from ..framework import fail


def reference_weights(inputs: dict, scale: str = "mean", keep_grads: bool = False,
                      last_only: bool = False, sync: str = "last") -> list:
    """Weights after each call (``sync``: when the probe's all-reduce scales the grads)."""
    import torch

    model = build_mlp(inputs["spec"])
    optimizer = torch.optim.SGD(model.parameters(), lr=inputs["lr"])
    after = []
    for batches in inputs["calls"]:
        if not keep_grads:
            optimizer.zero_grad()
        chosen = batches[-1:] if last_only else batches
        for index, (x, y) in enumerate(chosen):
            loss = torch.nn.functional.cross_entropy(model(torch.tensor(x)), torch.tensor(y))
            (loss / len(batches) if scale == "mean" else loss).backward()
            if sync == "each" or (sync == "last" and index == len(chosen) - 1):
                for parameter in model.parameters():
                    parameter.grad.mul_(inputs["reduce_scale"])
        optimizer.step()
        after.append(parameter_values(model))
    return after


def _close(a: list, b: list) -> bool:
    from torch import allclose, tensor
    return all(allclose(tensor(p), tensor(q), rtol=1e-4, atol=1e-6)
               for p, q in zip(a, b, strict=True))


# (how the weights come out, the cause it names, the fix)
MISTAKES: list[tuple[dict[str, Any], str, str]] = [
    ({"scale": "sum"}, ("the gradients of the micro-batches add up: the step is "
                        "len(micro_batches) times too big"),
     "divide each micro-batch's loss by len(micro_batches) before backward()."),
    ({"last_only": True}, ("only the last micro-batch's gradient was left when the optimizer "
                           "stepped: zero_grad() inside the loop wipes the others"),
     "call optimizer.zero_grad() once, at the start, not per micro-batch."),
    ({"keep_grads": True}, "the gradients of the previous call were still there",
     "start with optimizer.zero_grad() (or end with it after optimizer.step())."),
    ({"sync": "each"}, "each micro-batch's gradients were all-reduced, whatever the log said",
     "put all but the last micro-batch inside `with ddp_model.no_sync():`."),
    ({"sync": "never"}, "the gradients were never all-reduced, whatever the log said",
     "run the last micro-batch's forward and backward through ddp_model itself."),
]


def expect_the_weights(inputs: dict, observations: list) -> None:
    """Each call's weights against the reference step, and, if they differ, each mistake's."""
    expected = reference_weights(inputs)
    for index, call in enumerate(observations):
        parameters = call["parameters"]
        if _close(parameters, expected[index]):
            continue
        for bug, cause, fix in MISTAKES:
            if _close(parameters, reference_weights(inputs, **bug)[index]):
                seen = ": accumulation_step() did not call optimizer.zero_grad()" if bug.get(
                    "keep_grads") and "zero" not in call["log"] else ""
                fail(f"After call {index + 1}, {cause}{seen}.", fix)
        fail(f"After call {index + 1}, the weights differ from one SGD step on the mean loss of "
             "all its micro-batches.", "average: divide each micro-batch's loss by "
             "len(micro_batches), backward each, then one optimizer.step().")
