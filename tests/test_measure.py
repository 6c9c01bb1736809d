"""course_utils.lab.measure: saved-for-backward bytes and graph nodes, on the CPU."""
from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.lab.measure import SavedTensors, graph_nodes

FLOAT = 4  # bytes per float32


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))


def batch(size=5):
    return torch.randn(size, 6), torch.randint(0, 3, (size,))


def test_backward_releases_what_the_forward_saved():
    model = mlp()
    x, y = batch()
    with SavedTensors(exclude=model.parameters()) as saved:
        loss = F.cross_entropy(model(x), y)
    # the input (5x6), the ReLU output (5x8, saved twice, counted once), the log-softmax
    # output (5x3), the labels (5 int64) and a 0-d total weight
    expected = (5 * 6 + 5 * 8 + 5 * 3 + 1) * FLOAT + 5 * 8
    assert saved.bytes_alive == saved.bytes_saved == expected
    assert saved.tensors_alive == saved.tensors_saved
    loss.backward()
    assert saved.bytes_alive == 0 and saved.tensors_alive == 0
    assert saved.bytes_saved == expected  # the history stays


def test_gradients_are_unchanged_by_the_hooks():
    model, twin = mlp(), mlp()
    x, y = batch()
    with SavedTensors():
        F.cross_entropy(model(x), y).backward()
    F.cross_entropy(twin(x), y).backward()
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad)


def test_graphs_without_backward_keep_their_activations_until_dropped():
    model = mlp()
    kept = []
    with SavedTensors(exclude=model.parameters()) as saved:
        for _ in range(3):
            x, y = batch()
            kept.append(F.cross_entropy(model(x), y))
            alive = saved.bytes_alive
    assert alive == saved.bytes_saved > 0
    assert saved.bytes_alive == 3 * (saved.bytes_saved // 3)  # one batch's worth each
    kept.pop()
    assert saved.bytes_alive == 2 * (saved.bytes_saved // 3)
    kept.clear()  # no garbage collection needed: no reference cycles
    assert saved.bytes_alive == 0


def test_nothing_is_saved_without_autograd():
    model = mlp()
    with SavedTensors(exclude=model.parameters()) as saved, torch.no_grad():
        F.cross_entropy(model(batch()[0]), batch()[1])
    assert saved.tensors_saved == 0 and saved.bytes_alive == 0


def test_ignored_tensors_and_shared_storage():
    w = torch.randn(3, requires_grad=True)
    x = torch.randn(3, requires_grad=True)
    with SavedTensors(exclude=[w]) as saved:
        y = (w * x).sum()  # mul saves both; w is excluded
    assert saved.bytes_alive == 3 * FLOAT and saved.tensors_alive == 1
    assert saved.bytes_excluded == 3 * FLOAT and saved.storages_saved == 1
    with SavedTensors() as saved:
        e = x.exp()  # saves its result
        z = (e * e).sum()  # saves e twice more: one storage
    assert saved.tensors_alive == 3 and saved.bytes_alive == 3 * FLOAT
    del y, z, e
    assert saved.bytes_alive == 0


def test_a_saved_slice_counts_its_whole_storage():
    layer, batch = torch.nn.Linear(3, 2), torch.randn(100, 3)
    with SavedTensors(exclude=layer.parameters()) as saved:
        out = layer(batch[:4])  # Linear saves its input: a view that holds the whole batch
    assert saved.bytes_saved == 100 * 3 * FLOAT
    del out


def test_views_of_one_storage_count_it_once():
    base = torch.randn(10, requires_grad=True)
    with SavedTensors() as saved:
        h = base * 2
        parts = (h[:5].exp().sum(), h[5:].exp().sum())  # two results in two storages
    assert saved.bytes_alive == 2 * 5 * FLOAT
    del parts
    assert saved.bytes_alive == 0


def test_only_the_block_is_recorded():
    x = torch.randn(4, requires_grad=True)
    with SavedTensors() as saved:
        inside = x.exp()
    outside = x.exp()
    assert saved.tensors_saved == 1
    del inside, outside
    assert saved.bytes_alive == 0


def test_meta_tensors_are_not_counted():
    x = torch.randn(4, device="meta", requires_grad=True)
    with SavedTensors() as saved:
        y = x.exp().sum()
    assert saved.tensors_saved == 0
    y.backward()  # still differentiable
    assert x.grad.device.type == "meta"


def test_graph_nodes_of_numbers_leaves_and_detached_tensors():
    leaf = torch.ones(2, requires_grad=True)
    assert graph_nodes(0.5) == 0
    assert graph_nodes(leaf) == 0
    assert graph_nodes((leaf * 2).detach()) == 0
    assert graph_nodes((leaf * 2).sum()) == 3  # SumBackward, MulBackward, AccumulateGrad


def test_a_running_total_of_losses_keeps_every_graphs_nodes_after_backward():
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    total, counts = 0.0, []
    with SavedTensors(exclude=model.parameters()) as saved:
        for _ in range(4):
            x, y = batch()
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total = total + loss  # the mistake
            counts.append(graph_nodes(total))
            assert saved.bytes_alive == 0  # backward released the activations...
    steps = {b - a for a, b in itertools.pairwise(counts)}
    assert len(steps) == 1 and steps.pop() > 0  # ...but the nodes grow by one graph a batch


@pytest.mark.parametrize("exception", [ValueError, KeyboardInterrupt])
def test_hooks_are_removed_when_the_block_raises(exception):
    x = torch.randn(3, requires_grad=True)
    with pytest.raises(exception), SavedTensors() as saved:
        raise exception()
    y = x.exp()  # no hooks left behind
    assert saved.tensors_saved == 0
    assert y.grad_fn is not None
