"""What a run's reports mean: which samples each epoch saw, and how far two sets of weights are."""
from __future__ import annotations

import torch

from .records import Coverage, RankReport


def epoch_coverage(reports: list[RankReport]) -> list[Coverage]:
    """Per epoch: how many samples each rank drew, how many distinct, how many twice."""
    passes = [report.epochs() for report in reports]
    coverage = []
    for epoch in range(min((len(p) for p in passes), default=0)):
        drawn = [[i for batch in rank_passes[epoch] for i in batch] for rank_passes in passes]
        order = [i for rank_drawn in drawn for i in rank_drawn]
        coverage.append(Coverage(epoch, [len(d) for d in drawn], len(set(order)),
                                 len(order) - len(set(order)), order))
    return coverage


def max_difference(first: list, second: list) -> float:
    """The largest absolute difference between two parameter lists of the same shapes."""
    return max(float((torch.tensor(a, dtype=torch.float64) - torch.tensor(b, dtype=torch.float64)
                      ).abs().max()) for a, b in zip(first, second, strict=True))
