"""The check's reference: the weights one process reaches on the batches the ranks reported."""
from __future__ import annotations

import torch

from ...lab.distributed import RankReport, RunConfig
from ...probe import build_mlp, parameter_values


def global_steps(reports: list[RankReport]) -> list[list[list[int]]]:
    """Each optimizer step as the ranks' batches side by side: ``[[rank0 batch, rank1 batch]]``."""
    passes = [report.epochs() for report in reports]
    steps: list[list[list[int]]] = []
    for epoch in range(min((len(p) for p in passes), default=0)):
        # Ranks with unequal batch counts would have hung in DDP: pair up what they share.
        steps.extend(list(batches) for batches in zip(*(p[epoch] for p in passes), strict=False))
    return steps


def reference_parameters(config: RunConfig, steps: list[list[list[int]]]) -> list:
    """The weights one process reaches with SGD when each step averages the ranks' mean losses.

    That average is what DDP's all-reduce computes: with batches of equal size it is the
    mean loss over their union, i.e. one process training on the full batch.
    """
    model = build_mlp(config.weights)
    features = torch.tensor(config.features, dtype=torch.float32)
    labels = torch.tensor(config.labels, dtype=torch.int64)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)
    for batches in steps:
        optimizer.zero_grad()
        losses = [torch.nn.functional.cross_entropy(model(features[b]), labels[b])
                  for b in batches]
        (sum(losses, torch.zeros(())) / len(losses)).backward()
        optimizer.step()
    return parameter_values(model)
