"""Lesson 09's pipeline on the ranks: a model's consecutive layers cut into one stage per rank,
trained with a schedule of ``torch.distributed.pipelining``, with each rank's computing timed
apart from its waiting (the bubble), and compared with the same steps taken by the whole model
in one process.

In a rank's script (started by ``sharding.run_ranks``)::

    reference = pipeline_parallel.train_whole(model, batches, lr)    # every rank, alone
    stage = pipeline_parallel.TimedStage(
        pipeline_parallel.stage_layers(model, rank, world), rank, world, device)
    record = pipeline_parallel.train_stage(stage, m, batches, lr, reference)  # ScheduleGPipe
"""
from __future__ import annotations

import copy
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

from .args import is_whole, positive_int, positive_number
from .sharding import PipelineRecord

__all__ = ["TimedStage", "WholeModelSteps", "stage_bounds", "stage_layers", "train_stage",
           "train_whole"]


def stage_bounds(layers: int, stage: int, stages: int) -> range:
    """The layers that ``stage`` of ``stages`` holds: consecutive, as even as whole layers
    allow (the later stages take the extra ones), every layer in exactly one stage."""
    positive_int(layers, "layers", "stage_bounds")
    positive_int(stages, "stages", "stage_bounds")
    if stages > layers:
        raise ValueError(f"stage_bounds: stages must be at most the {layers} layers, so that "
                         f"no stage is empty, got {stages!r}.")
    if not is_whole(stage) or not 0 <= stage < stages:
        raise ValueError(f"stage_bounds: stage must be a whole number from 0 to {stages - 1}, "
                         f"got {stage!r}.")
    return range(stage * layers // stages, (stage + 1) * layers // stages)


def stage_layers(model: nn.Sequential, stage: int, stages: int) -> nn.Sequential:
    """A copy of ``stage``'s layers of ``model``, under the same names as in ``model`` (its
    parameters are named "2.0.weight", ... as the whole model's are: they can be compared)."""
    if not isinstance(model, nn.Sequential):
        raise TypeError(f"stage_layers: model must be an nn.Sequential (its layers in order), "
                         f"got {type(model).__name__}.")
    names = list(model._modules)
    return nn.Sequential(OrderedDict((names[i], copy.deepcopy(model[i]))
                                     for i in stage_bounds(len(names), stage, stages)))


class TimedStage(PipelineStage):
    """A ``PipelineStage`` that adds up how long its forward and backward chunks compute.

    The schedule waits for the neighbouring stages between chunks (receiving activations or
    gradients); inside a chunk the stage only computes. So the chunks' time is the rank's busy
    time, and the rest of the step is the bubble. On a GPU the chunks are timed by CUDA events
    on the stream that computes them (the host only queues the work)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._intervals: list = []

    def forward_one_chunk(self, *args, **kwargs):
        start = self._mark()
        try:
            return super().forward_one_chunk(*args, **kwargs)
        finally:
            self._intervals.append((start, self._mark()))

    def backward_one_chunk(self, *args, **kwargs):
        start = self._mark()
        try:
            return super().backward_one_chunk(*args, **kwargs)
        finally:
            self._intervals.append((start, self._mark()))

    def _mark(self):
        if self.device.type == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def take_busy_seconds(self) -> float:
        """Seconds spent in chunks since the last call (the device's work finished first)."""
        intervals, self._intervals = self._intervals, []
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return sum(start.elapsed_time(end) for start, end in intervals) / 1e3
        return sum(end - start for start, end in intervals)


@dataclass(frozen=True)
class WholeModelSteps:
    """The steps of the unsplit model in one process: what a split must reproduce."""

    losses: list  # the loss of each step's whole batch
    first_gradients: dict  # parameter name -> its gradient after the first backward
    weights: dict  # parameter name -> its value after the last step


def train_whole(model: nn.Module, batches: Sequence, lr: float) -> WholeModelSteps:
    """SGD steps of a copy of ``model`` on each (features, labels) of ``batches``, whole."""
    positive_number(lr, "lr", "train_whole")
    model = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses, first_gradients = [], {}
    for features, labels in batches:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(features), labels)
        loss.backward()
        losses.append(loss.item())
        if not first_gradients:
            first_gradients = {name: p.grad.clone() for name, p in model.named_parameters()}
        optimizer.step()
    return WholeModelSteps(losses, first_gradients,
                           {name: p.detach().clone() for name, p in model.named_parameters()})


def train_stage(stage: TimedStage, micro_batches: int, batches: Sequence, lr: float,
                reference: WholeModelSteps, schedule=ScheduleGPipe) -> PipelineRecord:
    """This rank's part of SGD steps on ``batches``, each cut into ``micro_batches`` by
    ``schedule`` (every rank calls it alike), each step timed from a barrier to a barrier: the
    pipeline's whole step, the same on every rank. The first step, which also agrees on the
    shapes the stages send, is compared but not timed; the record holds the medians of the
    others. ``schedule`` is a class of torch.distributed.pipelining with one stage per rank
    (ScheduleGPipe, Schedule1F1B); its loss is the mean cross-entropy, its gradients averaged
    over the micro-batches, as the whole batch's mean loss would give them."""
    import torch.distributed as dist

    positive_int(micro_batches, "micro_batches", "train_stage")
    positive_number(lr, "lr", "train_stage")
    batches = list(batches)
    if len(batches) < 2:
        raise ValueError(f"train_stage: batches must hold at least 2 batches (the first step is "
                         f"not timed), got {len(batches)}.")
    pipeline = schedule(stage, n_microbatches=micro_batches, loss_fn=F.cross_entropy)
    optimizer = torch.optim.SGD(stage.submod.parameters(), lr=lr)
    steps, busy, loss_difference, gradient_difference = [], [], None, None
    for features, labels in batches:
        optimizer.zero_grad()
        losses: list = []
        _wait(stage.device)
        dist.barrier()
        start = time.perf_counter()
        # The first stage is given the features, the last the labels; the others receive
        # what they need from their neighbours.
        pipeline.step(*([features] if stage.is_first else []),
                      target=labels if stage.is_last else None, losses=losses)
        _wait(stage.device)
        dist.barrier()
        steps.append(time.perf_counter() - start)
        busy.append(stage.take_busy_seconds())
        if losses:  # the last stage: one loss per micro-batch, each a mean over its rows
            loss = torch.stack(losses).mean().item()
            expected = reference.losses[len(steps) - 1]
            loss_difference = max(loss_difference or 0.0, abs(loss - expected))
        if gradient_difference is None:
            gradient_difference = _largest_difference(
                {name: p.grad for name, p in stage.submod.named_parameters()},
                reference.first_gradients)
        optimizer.step()
    weight_difference = _largest_difference(
        {name: p.detach() for name, p in stage.submod.named_parameters()}, reference.weights)
    return PipelineRecord(micro_batches, median(steps[1:]), median(busy[1:]),
                          loss_difference, gradient_difference, weight_difference)


def _largest_difference(mine: dict, reference: dict) -> float:
    """Largest |difference| between this stage's tensors and the whole model's same-named ones."""
    return max((tensor.cpu() - reference[name].cpu()).abs().max().item()
               for name, tensor in mine.items())


def _wait(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
