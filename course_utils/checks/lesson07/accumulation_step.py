"""accumulation_step(): k micro-batches, no_sync for all but the last, one optimizer step."""
from __future__ import annotations

import random

from ...probe import Spy, build_mlp, marked_world, parameter_values, patched, run_learner
from ..framework import check, expect_no_error, fail
from .accumulation_step_rules import expect_the_weights


def make_inputs(seed: int, hidden: bool) -> dict:
    rng = random.Random(seed if hidden else 0)
    micro = rng.choice([2, 4]) if hidden else 3
    # The micro-batch size never equals their number: mistaking one for the other must show.
    size = rng.choice([n for n in range(2, 6) if n != micro]) if hidden else 4

    def draw(rows, cols):
        return [[round(rng.uniform(-1, 1), 4) for _ in range(cols)] for _ in range(rows)]
    calls = [[[draw(size, 4), [rng.randrange(3) for _ in range(size)]] for _ in range(micro)]
             for _ in range(2)]
    spec = {"w1": draw(6, 4), "b1": draw(1, 6)[0], "w2": draw(3, 6), "b2": draw(1, 3)[0]}
    # The probe's process group scales what each all-reduce reduces by reduce_scale.
    return {"spec": spec, "calls": calls, "lr": rng.choice([0.1, 0.3]) if hidden else 0.1,
            "reduce_scale": rng.choice([0.5, 1.5, 2.5]) if hidden else 1.5}


def probe(accumulation_step, inputs):
    """Call accumulation_step() twice on a one-process DDP model; log losses, all-reduces (of
    the process group: DDP's or any other), no_sync() blocks, forwards and steps."""
    import contextlib
    import gc

    import torch
    from torch.nn.parallel import DistributedDataParallel

    def observe(group, log):
        model = build_mlp(inputs["spec"])
        ddp_model, calls = DistributedDataParallel(model, process_group=group), []

        def loss_fn(outputs, labels):
            log.append("loss")
            return torch.nn.functional.cross_entropy(outputs, labels)

        @contextlib.contextmanager
        def logged_no_sync(*args, **kwargs):  # where the learner's no_sync() blocks begin and end
            with original_no_sync(*args, **kwargs):
                log.append("no_sync")
                try:
                    yield
                finally:
                    log.append("no_sync ended")

        original_no_sync = ddp_model.no_sync
        # Through ddp_model or its module: the learner's micro-batches reach the model.
        model.register_forward_pre_hook(lambda module, args: log.append("forward"))
        optimizer = torch.optim.SGD(ddp_model.parameters(), lr=inputs["lr"])
        for batches in inputs["calls"]:
            micro_batches = [(torch.tensor(x), torch.tensor(y)) for x, y in batches]
            log.clear()
            with Spy(optimizer, "step", "step", log), Spy(optimizer, "zero_grad", "zero", log), \
                    patched([(ddp_model, "no_sync", logged_no_sync)]):
                run = run_learner(accumulation_step, ddp_model, micro_batches, loss_fn, optimizer)
            calls.append({"error": run.error, "log": list(log),
                          "parameters": parameter_values(model)})
            if run.error:
                break
        return calls
    # Every all-reduce on the group, however the answer issues it, scales what it reduces by
    # reduce_scale: the weights show how many ran and on what, whatever a log kept here says.
    log = []
    with marked_world(inputs["reduce_scale"], log) as group:
        try:
            return observe(group, log)
        finally:
            gc.collect()  # the DDP models go while their group is still the default


def _success(inputs: dict) -> str:
    return (f"accumulation_step() on a one-process DDP model, 2 calls of "
            f"{len(inputs['calls'][0])} micro-batches: one "
            "all-reduce each (after the last micro-batch), one optimizer step, and the weights "
            "of one step on the mean loss of all the micro-batches.")


@check(success=_success, make_inputs=make_inputs, probe=probe)
def check_accumulation_step(inputs, observations, hidden):
    for index, (call, batches) in enumerate(zip(observations, inputs["calls"], strict=False)):
        where, k = f"In call {index + 1} ({len(batches)} micro-batches)", len(batches)
        expect_no_error(call["error"], "accumulation_step()", where=where)
        log = call["log"]
        if log.count("loss") != k:
            fail(f"{where}, the model (ddp_model) ran {log.count('forward')} forward pass(es) "
                 f"and the loss was computed {log.count('loss')} time(s).",
                 "compute the loss and call backward() once per micro-batch.")
        synced = sorted({log[:at].count("loss") for at, event in enumerate(log)
                         if event == "all-reduce"})
        if not synced:
            fail(_never_reduced(where, log, k), "run the last micro-batch's forward and "
                 "backward outside no_sync(), through ddp_model itself.")
        if k not in synced:
            fail(f"{where}, the gradients were all-reduced after micro-batch(es) {synced} but "
                 "not after the last: the gradients added after that all-reduce are never "
                 "averaged across the ranks, so their weights drift apart.", "run the last "
                 "micro-batch outside no_sync(), and all the others inside "
                 "`with ddp_model.no_sync():`.")
        if synced != [k]:
            fail(f"{where}, the gradients were all-reduced after micro-batch(es) {synced}: each "
                 "all-reduce before the last sends every gradient over the network for nothing.",
                 "put the forward and backward of all but the last micro-batch inside "
                 "`with ddp_model.no_sync():`.")
        if log.count("step") != 1:
            fail(f"{where}, optimizer.step() ran {log.count('step')} times.", "step once, "
                 "after the last micro-batch's backward.")
    if len(observations) != len(inputs["calls"]):  # every call ran, or one failed above
        raise ValueError("incomplete observations")
    expect_the_weights(inputs, observations)


def _never_reduced(where: str, log: list, k: int) -> str:
    """Why DDP never all-reduced, from the micro-batches whose loss was computed inside a
    no_sync() block."""
    inside, depth, losses = [], 0, 0
    for event in log:
        depth += {"no_sync": 1, "no_sync ended": -1}.get(event, 0)
        if event == "loss":
            losses += 1
            inside += [losses] if depth > 0 else []
    if inside == list(range(1, k + 1)):
        return (f"{where}, every micro-batch ran inside no_sync(), the last one (index "
                f"{k - 1}, equal to len(micro_batches) - 1) included: DDP never all-reduced, "
                "so the ranks' gradients would never be averaged.")
    return (f"{where}, DDP never all-reduced: micro-batch(es) {inside or 'none'} ran inside "
            "no_sync(), and the other backward passes ran on ddp_model.module or did not run, "
            "so the ranks' gradients would never be averaged.")
