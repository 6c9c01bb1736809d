"""Tests of the check course_utils/checks/lesson07/accumulation_step.py."""
from __future__ import annotations

import json
from contextlib import ExitStack, nullcontext

import pytest
import torch.distributed as dist

from course_utils import checks

from ...probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from ...solutions import solution
from .shared import LESSON

accumulation_step = solution(LESSON, "accumulation_step")


# ================================================================ accumulation_step

def accumulation_exit_stack(ddp_model, micro_batches, loss_fn, optimizer):
    """Right: the first k-1 micro-batches under one no_sync block, the last one after it."""
    optimizer.zero_grad()
    *first, last = micro_batches
    with ddp_model.no_sync():
        for features, labels in first:
            (loss_fn(ddp_model(features), labels) / len(micro_batches)).backward()
    features, labels = last
    (loss_fn(ddp_model(features), labels) / len(micro_batches)).backward()
    optimizer.step()


def accumulation_zero_grad_last(ddp_model, micro_batches, loss_fn, optimizer):
    """Right: zero the gradients after the step, through the module, with an ExitStack."""
    for index, (features, labels) in enumerate(micro_batches):
        with ExitStack() as stack:
            if index < len(micro_batches) - 1:
                stack.enter_context(ddp_model.no_sync())
            loss = loss_fn(ddp_model(features), labels)
            (loss * (1 / len(micro_batches))).backward()
    optimizer.step()
    ddp_model.zero_grad()


def accumulation_grads_divided(ddp_model, micro_batches, loss_fn, optimizer):
    """Right: backward the plain losses, then divide the accumulated gradients by their number
    (after the all-reduce: the same average); zero_grad(set_to_none=False)."""
    optimizer.zero_grad(set_to_none=False)
    count = len(micro_batches)
    for index, (features, labels) in enumerate(micro_batches):
        context = nullcontext() if index == count - 1 else ddp_model.no_sync()
        with context:
            loss_fn(ddp_model(features), labels).backward()
    for parameter in ddp_model.parameters():
        parameter.grad.div_(count)
    optimizer.step()


def accumulation_sliced(ddp_model, micro_batches, loss_fn, optimizer):
    """Right: the last micro-batch taken apart by slicing, the loss divided with .div()."""
    ddp_model.zero_grad(set_to_none=True)
    k = len(micro_batches)
    for features, labels in micro_batches[:-1]:
        with ddp_model.no_sync():
            loss_fn(ddp_model(features), labels).div(k).backward()
    features, labels = micro_batches[-1]
    loss_fn(ddp_model(features), labels).div(k).backward()
    optimizer.step()


def accumulation_weighted_by_samples(ddp_model, micro_batches, loss_fn, optimizer):
    """Right: each micro-batch's mean loss weighted by its share of the samples (the mean over
    all samples; with micro-batches of one size, the mean of their losses)."""
    optimizer.zero_grad()
    total = sum(len(labels) for _, labels in micro_batches)
    *early, last = micro_batches
    for features, labels in early:
        with ddp_model.no_sync():
            (loss_fn(ddp_model(features), labels) * len(labels) / total).backward()
    features, labels = last
    (loss_fn(ddp_model(features), labels) * len(labels) / total).backward()
    optimizer.step()


def accumulation_sync_first(ddp_model, micro_batches, loss_fn, optimizer):
    """Wrong: all-reduces the first micro-batch and accumulates the rest unsynced."""
    optimizer.zero_grad()
    for index, (features, labels) in enumerate(micro_batches):
        with ddp_model.no_sync() if index > 0 else nullcontext():
            (loss_fn(ddp_model(features), labels) / len(micro_batches)).backward()
    optimizer.step()


def accumulation_step_inside_no_sync(ddp_model, micro_batches, loss_fn, optimizer):
    """Wrong: the whole loop and the step inside one no_sync block."""
    optimizer.zero_grad()
    with ddp_model.no_sync():
        for features, labels in micro_batches:
            (loss_fn(ddp_model(features), labels) / len(micro_batches)).backward()
        optimizer.step()


def accumulating(sync="last", scale=True, zero="start", step="end", through=None):
    """accumulation_step with one thing changed."""
    def answer(ddp_model, micro_batches, loss_fn, optimizer):
        model = through(ddp_model) if through else ddp_model
        if zero == "start":
            optimizer.zero_grad()
        for index, (features, labels) in enumerate(micro_batches):
            last = index == len(micro_batches) - 1
            if zero == "each":
                optimizer.zero_grad()
            skip = {"last": not last, "never": False, "always": True}[sync]
            with ddp_model.no_sync() if skip else nullcontext():
                loss = loss_fn(model(features), labels)
                (loss / len(micro_batches) if scale else loss).backward()
            if step == "each":
                optimizer.step()
        if step == "end":
            optimizer.step()
    return answer


def accumulation_not_done(ddp_model, micro_batches, loss_fn, optimizer):
    raise NotImplementedError()


@pytest.mark.parametrize("answer", [accumulation_step, accumulation_exit_stack,
                                    accumulation_zero_grad_last, accumulation_grads_divided,
                                    accumulation_sliced, accumulation_weighted_by_samples],
                         ids=lambda f: f.__name__)
def test_accumulation_right_answers_keep_full_marks(answer, capsys):
    seeds = HIDDEN_SEEDS if answer is accumulation_step else []  # the visible run tells
    passes(checks.check_accumulation_step, answer, seeds=seeds)
    assert "one all-reduce each (after the last micro-batch)" in capsys.readouterr().out


@pytest.mark.parametrize("answer, hint", [
    (accumulating(sync="never"), "all-reduced after micro-batch(es) [1, 2, 3]"),
    (accumulating(sync="always"), ("every micro-batch ran inside no_sync(), the last one (index "
                                  "2, equal to len(micro_batches) - 1) included: DDP never")),
    (accumulating(through=lambda m: m.module), ("DDP never all-reduced: micro-batch(es) [1, 2] "
                                               "ran inside no_sync(), and the other backward")),
    (accumulating(scale=False), "the step is len(micro_batches) times too big"),
    (accumulating(zero="each"), "zero_grad() inside the loop wipes the others"),
    (accumulating(zero="never"), ("the gradients of the previous call were still there: "
                                 "accumulation_step() did not call optimizer.zero_grad()")),
    (accumulating(step="each"), "optimizer.step() ran 3 times"),
    (accumulation_not_done, "accumulation_step() is not implemented yet"),
    (accumulation_sync_first,
     "all-reduced after micro-batch(es) [1] but not after the last: the gradients added after"),
    (accumulation_step_inside_no_sync, "every micro-batch ran inside no_sync(), the last"),
], ids=["no no_sync", "all in no_sync", "via .module", "loss not divided", "zero_grad each",
        "no zero_grad", "step each", "stub", "sync on the first", "step inside no_sync"])
def test_accumulation_mistakes_are_named(answer, hint):
    assert hint in failure(checks.check_accumulation_step, answer)


def test_no_sync_must_cover_the_forward_pass():
    """A forward outside no_sync() already arms DDP's all-reduce for the coming backward."""
    def forward_outside(ddp_model, micro_batches, loss_fn, optimizer):
        optimizer.zero_grad()
        for index, (features, labels) in enumerate(micro_batches):
            loss = loss_fn(ddp_model(features), labels) / len(micro_batches)
            with ddp_model.no_sync() if index < len(micro_batches) - 1 else nullcontext():
                loss.backward()
        optimizer.step()
    message = failure(checks.check_accumulation_step, forward_outside)
    assert "put the forward and backward of all but the last micro-batch inside" in message


def accumulation_filtering_the_log(ddp_model, micro_batches, loss_fn, optimizer):
    """Wrong, and hiding it: no no_sync(), then the probe's log rewritten to show one
    all-reduce after the last micro-batch (the log is reachable through loss_fn)."""
    log = next(cell.cell_contents for cell in loss_fn.__closure__
               if isinstance(cell.cell_contents, list))
    accumulating(sync="never")(ddp_model, micro_batches, loss_fn, optimizer)
    kept = [event for event in log if event != "all-reduce"]
    last_loss = max(at for at, event in enumerate(kept) if event == "loss")
    log[:] = kept[:last_loss + 1] + ["all-reduce"] + kept[last_loss + 1:]


def test_a_rewritten_all_reduce_log_does_not_hide_the_all_reduces():
    """The probe's all-reduce scales the gradients by a factor drawn with the inputs: the
    weights show an all-reduce after every micro-batch, whatever the log says."""
    message = failure(checks.check_accumulation_step, accumulation_filtering_the_log)
    assert "each micro-batch's gradients were all-reduced, whatever the log said" in message
    for seed in HIDDEN_SEEDS[:2]:
        verdict = graded(checks.check_accumulation_step, (accumulation_filtering_the_log,),
                         hidden=True, seed=seed)
        assert verdict.fraction == 0


def test_accumulation_wrong_answers_score_zero_and_reveal_nothing():
    for seed in HIDDEN_SEEDS:
        verdict = graded(checks.check_accumulation_step, (accumulating(scale=False),),
                         hidden=True, seed=seed)
        assert verdict.fraction == 0 and not any(ch.isdigit() for ch in verdict.message
                                                 .replace("call 1", "").replace("call 2", ""))


def divided_by_batch_size(ddp_model, micro_batches, loss_fn, optimizer):
    """Wrong: divides by the micro-batch's size instead of the number of micro-batches."""
    optimizer.zero_grad()
    *first, last = micro_batches
    with ddp_model.no_sync():
        for features, labels in first:
            (loss_fn(ddp_model(features), labels) / len(labels)).backward()
    features, labels = last
    (loss_fn(ddp_model(features), labels) / len(labels)).backward()
    optimizer.step()


def test_every_hidden_draw_separates_the_number_of_micro_batches_from_their_size():
    """A draw whose micro-batch size equals their number would let this mistake pass."""
    for seed in range(40):
        inputs = checks.check_accumulation_step.make_inputs(seed, True)
        assert len(inputs["calls"][0]) != len(inputs["calls"][0][0][1]), seed
    for seed in HIDDEN_SEEDS:
        verdict = graded(checks.check_accumulation_step, (divided_by_batch_size,), hidden=True,
                         seed=seed)
        assert verdict.fraction < 1, seed


def test_accumulation_probe_leaves_no_process_group():
    checks.check_accumulation_step(accumulation_step)
    assert not dist.is_initialized()


def test_accumulation_hidden_inputs_follow_the_seed():
    made = {json.dumps(checks.check_accumulation_step.make_inputs(seed, True))
            for seed in HIDDEN_SEEDS}
    assert len(made) == len(HIDDEN_SEEDS)


# All-reduces the probe's own hook never saw: before the probe's process group marked every
# all-reduce, these scored 3/3 (one hooked all-reduce, after the last micro-batch).

def all_reduced_by_a_second_wrapper(ddp_model, micro_batches, loss_fn, optimizer):
    """Wrong, and hiding it: no no_sync(); all but the last micro-batch go through a second DDP
    wrapper of the same module (its own reducer, none of the probe's hooks)."""
    from torch.nn.parallel import DistributedDataParallel
    second = DistributedDataParallel(ddp_model.module)
    optimizer.zero_grad()
    *first, last = micro_batches
    for features, labels in first:
        (loss_fn(second(features), labels) / len(micro_batches)).backward()
    features, labels = last
    (loss_fn(ddp_model(features), labels) / len(micro_batches)).backward()
    optimizer.step()


def all_reduced_by_hand(ddp_model, micro_batches, loss_fn, optimizer):
    """Wrong, and hiding it: no no_sync(); all but the last micro-batch run on ddp_model.module
    and all-reduce their gradients with dist.all_reduce, by hand."""
    optimizer.zero_grad()
    *first, last = micro_batches
    for features, labels in first:
        (loss_fn(ddp_model.module(features), labels) / len(micro_batches)).backward()
        for parameter in ddp_model.parameters():
            dist.all_reduce(parameter.grad)
            parameter.grad /= dist.get_world_size()
    features, labels = last
    (loss_fn(ddp_model(features), labels) / len(micro_batches)).backward()
    optimizer.step()


@pytest.mark.parametrize("answer", [all_reduced_by_a_second_wrapper, all_reduced_by_hand],
                         ids=lambda f: f.__name__)
def test_all_reduces_the_probe_hook_never_saw_still_count(answer):
    """The probe's process group logs and marks every all-reduce issued on it, not only DDP's
    own: the gradients all-reduced on every micro-batch show, and the hidden run scores 0."""
    message = failure(checks.check_accumulation_step, answer)
    assert "the gradients were all-reduced after micro-batch(es) [1, 2, 3]" in message
    assert "put the forward and backward of all but the last micro-batch inside" in message
    verdict = graded(checks.check_accumulation_step, (answer,), hidden=True,
                     seed=HIDDEN_SEEDS[0])
    assert verdict.fraction == 0, verdict.message


def test_the_learners_own_process_group_comes_back_after_the_probe():
    """A notebook's demo leaves a one-process gloo group: the probe grades on its own group,
    then the learner's is the default again."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        mine = dist.group.WORLD
        passes(checks.check_accumulation_step, accumulation_step, seeds=[])
        assert dist.group.WORLD is mine and dist.get_backend() == "gloo"
    finally:
        dist.destroy_process_group()
