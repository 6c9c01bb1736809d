"""train_with_accumulation(): one optimizer step per group of micro-batches, mean gradient."""
from __future__ import annotations

import random
from typing import cast

from ...probe import ForwardRecorder, Spy, build_mlp, parameter_values, run_learner
from ..framework import case, check, expect_no_error, fail


def make_inputs(seed: int, hidden: bool) -> dict:
    rng = random.Random(seed if hidden else 5)

    def numbers(rows, cols):
        return [[round(rng.uniform(-1, 1), 3) for _ in range(cols)] for _ in range(rows)]

    def scenario(n, k):  # an MLP 3 -> 4 -> 2 and n micro-batches of 2 examples
        return {"model": {"w1": numbers(4, 3), "b1": numbers(1, 4)[0], "w2": numbers(2, 4),
                          "b2": numbers(1, 2)[0]}, "k": k, "lr": 0.1,
                "batches": [[numbers(2, 3), numbers(2, 2)] for _ in range(n)]}
    k = rng.choice((2, 3, 4))
    return {"scenarios": [scenario(2 * k + rng.randrange(1, k), k), scenario(2 * k, k)]
            if hidden else [scenario(5, 2)]}


def probe(train_with_accumulation, inputs):
    """Train a float64 MLP on the micro-batches; log forwards, backwards, zero_grads and steps."""
    import torch

    def run_scenario(scenario):
        model = build_mlp(scenario["model"]).double()
        batches = [(torch.tensor(x, dtype=torch.float64), torch.tensor(y, dtype=torch.float64))
                   for x, y in scenario["batches"]]
        optimizer, log = torch.optim.SGD(model.parameters(), lr=scenario["lr"]), []
        ForwardRecorder(model, log)

        def before_step(*args, **kwargs):  # what the step is about to use
            return {"params": parameter_values(model), "grads": [
                None if p.grad is None else p.grad.flatten().tolist() for p in model.parameters()]}

        spies = [Spy(optimizer, "step", log=log, record=before_step),
                 Spy(optimizer, "zero_grad", log=log), Spy(model, "zero_grad", log=log),
                 Spy(torch.autograd, "backward", log=log)]
        with spies[0], spies[1], spies[2], spies[3]:
            run = run_learner(train_with_accumulation, model, torch.nn.MSELoss(), optimizer,
                              batches, scenario["k"])
        return {"error": run.error, "log": log, "steps": spies[0].calls,
                "returned": run.value if type(run.value) is int else repr(run.value)[:40]}

    return [run_scenario(scenario) for scenario in inputs["scenarios"]]


def _mean_gradient(scenario: dict, params: list, group: list[int]) -> list[float]:
    """The trusted reference: gradient of the group's mean loss at ``params``, in float64."""
    import torch

    w1, b1, w2, b2 = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in params]
    losses = [torch.nn.functional.mse_loss(
        torch.relu(torch.tensor(x, dtype=torch.float64) @ w1.T + b1) @ w2.T + b2,
        torch.tensor(y, dtype=torch.float64)) for x, y in (scenario["batches"][i] for i in group)]
    torch.stack(losses).mean().backward()
    return [v for t in (w1, b1, w2, b2) for v in cast("torch.Tensor", t.grad).flatten().tolist()]


def _check_group(scenario: dict, number: int, group: list[int], events: list[str],
                 step: dict, before: dict | None) -> None:
    """Fail unless optimizer step ``number`` used the mean gradient over ``group``."""
    k, at, size = scenario["k"], f"At optimizer step {number + 1}", len(group)
    backwards = [i for i, event in enumerate(events) if event == "backward"]
    if events.count("forward") != size:
        fail(f"{at}, the model had run on {events.count('forward')} micro-batch(es) since the "
             f"last step, not {size}.", f"call optimizer.step() once every {k} micro-batches.")
    if len(backwards) < size:
        fail(f"{at}, backward() ran {len(backwards)} time(s) for {size} micro-batches: adding up "
             "the losses and calling backward() once keeps every micro-batch's graph and "
             "activations alive, as much memory as the full batch.",
             "call backward() on each micro-batch's scaled loss as soon as you have it.")
    if None in step["grads"]:
        fail(f"{at}, the parameters had no gradients: zero_grad() ran between the last "
             "backward() and step().", "zero the gradients after step(), not before it.")
    expected = _mean_gradient(scenario, step["params"], group)
    pairs = list(zip([v for grad in step["grads"] for v in grad], expected, strict=True))
    if all(abs(g - e) <= 1e-9 * (1 + abs(e)) for g, e in pairs):
        return
    ratio = sum(g * e for g, e in pairs) / max(sum(e * e for e in expected), 1e-300)
    scaled = all(abs(g - ratio * e) <= 1e-9 * (1 + abs(g)) for g, e in pairs)
    if "zero_grad" in events[backwards[0] + 1:]:
        fail(f"{at}, zero_grad() ran inside the accumulation loop: it threw away the gradients "
             "of the group's earlier micro-batches.", "zero once per group, after step().")
    previous = [v for grad in (before or {"grads": []})["grads"] for v in grad or []]
    if len(previous) == len(pairs) and all(  # this group's mean gradient added to the last's
            abs(g - e - p) <= 1e-9 * (1 + abs(g)) for (g, e), p in zip(pairs, previous,
                                                                        strict=True)):
        fail(f"{at}, the previous group's gradients were still in .grad: backward() adds to "
             "them.", "call optimizer.zero_grad() after each optimizer.step().")
    if scaled and abs(ratio - size) < 1e-6:
        fail(f"{at}, the gradients are the sum of the {size} micro-batches' gradients, not their "
             "mean.", "divide each micro-batch's loss by the number of micro-batches in its "
             "group before backward().")
    if scaled and abs(ratio - size / k) < 1e-6:
        fail(f"{at}, the last group has {size} micro-batch(es), but their losses were divided by "
             f"accumulation_steps={k}.", "divide by the size of the group: the final group can "
             "be smaller than the others.")
    fail(f"{at}, the gradients are not those of the group's mean loss.",
         "for each micro-batch: (loss / group size).backward(); after the group: "
         "optimizer.step(), optimizer.zero_grad().")


def _without_gradients(step: dict) -> bool:
    return all(grad is None or not any(grad) for grad in step["grads"])


def _success(inputs: dict) -> str:
    tried = "; ".join(f"{len(s['batches'])} micro-batches in groups of {s['k']}"
                      for s in inputs["scenarios"])
    return ("train_with_accumulation() steps once per group with the gradient of the group's "
            "mean loss (float64), the final smaller group included, calls backward() once per "
            f"micro-batch and returns the number of steps: {tried}.")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_train_with_accumulation(inputs, observations, hidden):
    for scenario, result in zip(inputs["scenarios"], observations, strict=True):
        n, k, steps = len(scenario["batches"]), scenario["k"], result["steps"]
        groups = [list(range(start, min(start + k, n))) for start in range(0, n, k)]
        where = f"{n} micro-batches, accumulation_steps={k}"
        expect_no_error(result["error"], "train_with_accumulation()", where=f"With {where}")
        segments = [[]]  # the events before each step, then those after the last one
        for event in result["log"]:
            segments.append([]) if event == "step" else segments[-1].append(event)
        with case(f"{where}: a step per full group, with the group's mean gradient", 2):
            if len(steps) == len(groups) + 1 and _without_gradients(steps[-1]):
                fail("optimizer.step() ran once more after the last group, with no gradients: "
                     f"{n} micro-batches make {len(groups)} groups of {k}" + (
                         "." if n % k else ", and no smaller group is left."),
                     "step after the loop only when a smaller group is left (when "
                     "len(micro_batches) % accumulation_steps is not 0).")
            if len(steps) > len(groups):
                fail(f"optimizer.step() ran {len(steps)} times"
                     + (", after every micro-batch." if len(steps) == n else "."),
                     f"step once per group of {k} micro-batches (the last group may be smaller).")
            for number, group in enumerate(groups[:n // k]):
                if number == len(steps):
                    fail(f"optimizer.step() ran only {number} time(s).",
                         f"step once every {k} micro-batches.")
                _check_group(scenario, number, group, segments[number], steps[number],
                             steps[number - 1] if number else None)
            if result["returned"] != len(steps):
                fail(f"train_with_accumulation() returned {result['returned']} after "
                     f"{len(steps)} optimizer steps.", "return the number of optimizer steps.")
        if n % k:
            with case(f"{where}: the final group of {n % k}, stepped and scaled by its size", 1):
                last = len(groups) - 1
                if len(steps) <= last:
                    fail(f"the last {n % k} micro-batch(es) never reached optimizer.step(): their "
                         "gradients are lost, or leak into the next epoch. `if (i + 1) % "
                         "accumulation_steps == 0` alone drops them.",
                         "after the loop, step once more if a smaller group is left.")
                _check_group(scenario, last, groups[last], segments[last], steps[last],
                             steps[last - 1] if last else None)
