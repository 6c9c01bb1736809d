"""train_until's cases and reference: drawn runs, the losses of each window, the stopping step."""
from __future__ import annotations

import random

from ..references import sgd_batches

READ_FIX = ("keep the window's total on the device (loss.detach() added up) and read it once, "
            "when steps % every == 0: if (window / every).item() <= target: return steps.")


def _matrix(rng: random.Random, rows: int, cols: int, spread: float) -> list[list[float]]:
    return [[round(rng.uniform(-spread, spread), 4) for _ in range(cols)] for _ in range(rows)]


def _losses_and_params(drawn: dict, steps: int | None) -> tuple[list[float], list]:
    return sgd_batches(drawn["model"], drawn["batches"], drawn["lr"], steps)


def _window_means(losses: list[float], every: int) -> list[float]:
    return [sum(losses[i:i + every]) / every for i in range(0, len(losses) - every + 1, every)]


def draw_case(rng: random.Random, *, every: int, batches: int, stop_check: int | None) -> dict:
    """A model, batches that repeat (so the loss falls), and a target met first at check
    ``stop_check`` (1-based), midway between its mean and the lowest mean before it; None: a
    target below every window's mean."""
    for _ in range(200):
        cycle = [[_matrix(rng, 6, 5, 2.0), [rng.randrange(3) for _ in range(6)]]
                 for _ in range(3)]
        drawn = {"model": {"w1": _matrix(rng, 8, 5, 0.5), "b1": [0.0] * 8,
                           "w2": _matrix(rng, 3, 8, 0.5), "b2": [0.0] * 3},
                 "lr": 0.2, "every": every, "stop_check": stop_check,
                 "batches": [cycle[i % 3] for i in range(batches)]}
        means = _window_means(_losses_and_params(drawn, None)[0], every)
        if stop_check is None:
            drawn["target"] = round(min(means) - 0.05, 4)
            return drawn
        before = min(means[:stop_check - 1])
        if before - means[stop_check - 1] > 0.04:
            drawn["target"] = round((before + means[stop_check - 1]) / 2, 4)
            return drawn
    raise RuntimeError("no falling loss drawn")  # pragma: no cover - never seen


def reference(drawn: dict) -> dict:
    """The steps a right answer takes and the weights it reaches."""
    losses, _ = _losses_and_params(drawn, None)
    means, every = _window_means(losses, drawn["every"]), drawn["every"]
    stop = next((index for index, mean in enumerate(means, 1) if mean <= drawn["target"]), None)
    steps = len(losses) if stop is None else stop * every
    return {"steps": steps, "params": _losses_and_params(drawn, steps)[1]}


def stop_fix(drawn: dict, expected: dict, steps_taken: int, returned) -> tuple[str, str]:
    """The cause and the fix when train_until stopped (or counted) wrongly."""
    every, right = drawn["every"], expected["steps"]
    if steps_taken == right:
        return (f"train_until took the right {right} steps but returned {returned!r}.",
                ("return the number of steps taken: the step of the check that met the target, "
                "or every batch when none did."))
    if steps_taken < right:
        return (f"train_until stopped after {steps_taken} steps; the mean loss of a window first "
                f"met the target at the check after step {right}"
                + (" (it never did: train on every batch)." if drawn["stop_check"] is None
                   else "."),
                ("compare the mean of the last `every` losses (the window's total / every, "
                "reset after each check) with target, and stop when it is <= target."))
    return ((f"train_until went on to step {steps_taken}; it should return at the check after "
             f"step {right}, where the mean of the last {every} losses (the window, reset to "
             "None or zero after each check) is <= target."),
            ("check after every `every`-th step (steps % every == 0), and reset the window "
            "after each check."))
