"""Trusted references for checks of training code: the expected numbers, computed in verify().

Inputs carry the data and a model's weights as plain numbers (drawn by ``make_inputs`` with
``random.Random(seed)``); the probe builds the same model with ``probe.build_mlp``
in the student's kernel, and these functions recompute on the trusted side what a correct
answer must produce. torch is imported inside the functions: the grader imports checks
without it.
"""
from __future__ import annotations

import random


def matrix(rng: random.Random, rows: int, cols: int, scale: float = 1.0) -> list[list[float]]:
    return [[round(rng.gauss(0, scale), 4) for _ in range(cols)] for _ in range(rows)]


def matrix_with_largest_product(rng: random.Random, rows: int, weight: list[list[float]],
                                target: float) -> list[list[float]]:
    """A random matrix x (rows × len(weight)) scaled so that max |x @ weight| is ``target``
    (to about 1e-5): inputs that land where a threshold on the product is probed."""
    x = matrix(rng, rows, len(weight))
    top = max(abs(sum(a * w[j] for a, w in zip(row, weight, strict=True)))
              for row in x for j in range(len(weight[0])))
    return [[round(a * target / top, 6) for a in row] for row in x]


def mlp_spec(rng: random.Random, sizes: tuple[int, int, int], scale: float = 0.5) -> dict:
    """Weights of Linear(n_in, hidden)-ReLU-Linear(hidden, n_out) as plain lists."""
    n_in, hidden, n_out = sizes
    return {"w1": matrix(rng, hidden, n_in, scale), "b1": matrix(rng, 1, hidden, scale)[0],
            "w2": matrix(rng, n_out, hidden, scale), "b2": matrix(rng, 1, n_out, scale)[0]}


def python_logits(spec: dict, features: list[list[float]]) -> list[list[float]]:
    """The MLP's outputs in plain Python (eval mode), for choosing labels in make_inputs."""
    def linear(rows, weight, bias):
        return [[sum(x * w for x, w in zip(row, ws, strict=True)) + b
                 for ws, b in zip(weight, bias, strict=True)] for row in rows]

    hidden = [[max(v, 0.0) for v in row] for row in linear(features, spec["w1"], spec["b1"])]
    return linear(hidden, spec["w2"], spec["b2"])


def _model_and_data(spec: dict, features, labels):
    import torch

    from ..probe import build_mlp
    return build_mlp(spec), torch.tensor(features), torch.tensor(labels)


def sgd_epoch(spec: dict, features, labels, batch_size: int, lr: float) -> dict:
    """One epoch of plain SGD, one step per batch in order: final parameters and batch losses."""
    import torch
    import torch.nn.functional as F

    from ..probe import parameter_values
    model, X, y = _model_and_data(spec, features, labels)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for start in range(0, len(X), batch_size):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(X[start:start + batch_size]), y[start:start + batch_size])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return {"parameters": parameter_values(model), "losses": losses}


def sgd_batches(spec: dict, batches, lr: float, steps: int | None = None
                ) -> tuple[list[float], list]:
    """Plain SGD in float64, one step per (features, labels) batch in order, the first
    ``steps`` of them (all where None): each step's loss and the final parameters."""
    import torch
    import torch.nn.functional as F

    from ..probe import build_mlp, parameter_values
    model = build_mlp(spec).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for features, labels in batches[:steps]:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(torch.tensor(features).double()), torch.tensor(labels))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses, parameter_values(model)


def accuracy(spec: dict, features, labels, batch_size: int) -> dict:
    """Accuracy over all examples and the mean of per-batch accuracies (eval mode)."""
    import torch

    model, X, y = _model_and_data(spec, features, labels)
    with torch.no_grad():
        logits = model.eval()(X)
    hits, starts = logits.argmax(dim=1) == y, range(0, len(y), batch_size)
    batches = [hits[start:start + batch_size].float().mean().item() for start in starts]
    # argmax() without dim: one index into each batch's flattened logits, compared with its labels
    flat = sum(int((y[s:s + batch_size] == logits[s:s + batch_size].argmax()).sum())
               for s in starts)
    return {"correct": int(hits.sum()), "total": len(hits), "accuracy": hits.float().mean().item(),
            "batch_mean": sum(batches) / len(batches), "flat_argmax_correct": flat}


def adam_steps(spec: dict, features, labels, lr: float, steps: int) -> dict:
    """Parameters and Adam state after ``steps`` full-batch steps, as plain numbers."""
    import torch
    import torch.nn.functional as F

    from ..probe import optimizer_state_values, parameter_values
    model, X, y = _model_and_data(spec, features, labels)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        optimizer.zero_grad()
        F.cross_entropy(model(X), y).backward()
        optimizer.step()
    return {"parameters": parameter_values(model),
            "optimizer": optimizer_state_values(optimizer)}


def largest_difference(a, b) -> float:
    """The largest absolute difference between two nested lists of numbers of one shape."""
    if isinstance(a, dict):
        if not isinstance(b, dict) or a.keys() != b.keys():
            return float("inf")
        return max((largest_difference(a[key], b[key]) for key in a), default=0.0)
    if isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            return float("inf")
        return max((largest_difference(x, y) for x, y in zip(a, b, strict=True)), default=0.0)
    if isinstance(b, (list, dict)) or b is None or a is None:
        return float("inf")
    return abs(a - b)
