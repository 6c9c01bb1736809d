"""What the course hands a DDP script: :class:`RunConfig` and its :class:`RecordedDataset`.

Every rank reads the same file (``RunConfig.from_environment()``), so every rank builds the
same data and model, and one process can recompute what the ranks should have reached. This
file is what a learner's script uses; the machinery that watches a rank is in ``rank.py``.
"""
from __future__ import annotations

import json
import os
import random
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

import torch
from torch.utils.data import Dataset

from ...probe import build_mlp
from ..args import positive_int, positive_number
from .records import CONFIG_ENV


@dataclass(frozen=True)
class RunConfig:
    """Data, starting weights and settings of one training run, as plain numbers."""

    features: list  # samples x 4 floats
    labels: list  # one class (0, 1 or 2) per sample
    weights: dict  # probe.build_mlp's spec: w1, b1, w2, b2
    batch_size: int = 4  # per rank
    epochs: int = 2
    lr: float = 0.5
    checkpoint: str = "checkpoint.pt"

    @classmethod
    def example(cls, seed: int = 0, samples: int = 48, batch_size: int = 4, epochs: int = 2,
                lr: float = 0.5, checkpoint: str = "checkpoint.pt") -> RunConfig:
        """A small 3-class problem and a 4-8-3 network, drawn from ``seed``."""
        for name, value in (("samples", samples), ("batch_size", batch_size),
                            ("epochs", epochs)):
            positive_int(value, name, "RunConfig.example")
        positive_number(lr, "lr", "RunConfig.example")
        rng = random.Random(seed)

        def draw(rows, cols, scale):
            return [[round(rng.uniform(-scale, scale), 4) for _ in range(cols)]
                    for _ in range(rows)]

        features = draw(samples, 4, 1.0)
        # A rule the network can learn, so that the loss the ranks log goes down.
        labels = [int(x[0] + x[1] > 0) + int(x[2] - x[3] > 0.5) for x in features]
        weights = {"w1": draw(8, 4, 0.5), "b1": draw(1, 8, 0.1)[0],
                   "w2": draw(3, 8, 0.5), "b2": draw(1, 3, 0.1)[0]}
        return cls(features, labels, weights, batch_size, epochs, lr, checkpoint)

    @classmethod
    def from_environment(cls) -> RunConfig:
        """The file named by ``$COURSE_DDP_CONFIG`` (set by :func:`launch`), else ``example()``."""
        path = os.environ.get(CONFIG_ENV)
        return cls.from_json(Path(path).read_text()) if path else cls.example()

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        return cls(**json.loads(text))

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @cached_property
    def dataset(self) -> RecordedDataset:
        """The training data; the same object each time, so sampler and loader share it."""
        return RecordedDataset(torch.tensor(self.features, dtype=torch.float32),
                               torch.tensor(self.labels, dtype=torch.int64))

    def build_model(self) -> torch.nn.Module:
        """Linear(4, 8)-ReLU-Linear(8, 3) with the starting weights, on the CPU."""
        return build_mlp(self.weights)


class RecordedDataset(Dataset):
    """A map-style dataset; in a rank run, the rank runner records which indices each batch
    asked for."""

    def __init__(self, features: torch.Tensor, labels: torch.Tensor):
        self.features, self.labels = features, labels

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index):
        return self.features[index], self.labels[index]

    def __getitems__(self, indices):
        """What a DataLoader calls once per batch (the rank runner records each call)."""
        return [(self.features[i], self.labels[i]) for i in indices]
