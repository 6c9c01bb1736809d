"""course_utils.lab.data: shapes, dtypes, seeds, devices, and clear errors for bad input."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_utils import data

# ------------------------------------------------------------------ toy data

def test_toy_tensors_are_the_appendix_data():
    X_train, y_train, X_test, y_test = data.toy_tensors()
    assert X_train.shape == (5, 2) and X_test.shape == (2, 2)
    assert y_train.tolist() == [0, 0, 0, 1, 1] and y_test.tolist() == [0, 1]
    assert X_train.dtype == torch.float32 and y_train.dtype == torch.int64
    assert X_train[0].tolist() == pytest.approx([-1.2, 3.1])
    assert all(t.device.type == "cpu" for t in (X_train, y_train, X_test, y_test))


def test_toy_tensors_are_fresh_copies():
    X_train = data.toy_tensors()[0]
    X_train.zero_()
    assert data.toy_tensors()[0].abs().sum() > 0


def test_toy_tensors_on_meta():
    assert {t.device.type for t in data.toy_tensors(device="meta")} == {"meta"}


def test_toy_dataset_indexing_and_length():
    X_train, y_train, _, _ = data.toy_tensors()
    dataset = data.ToyDataset(X_train, y_train)
    assert len(dataset) == 5
    features, label = dataset[3]
    assert features.tolist() == pytest.approx([2.3, -1.1]) and label.item() == 1


@pytest.mark.parametrize("features, labels, error", [
    ([[1.0, 2.0]], torch.tensor([0]), TypeError),
    (torch.zeros(3, 2), torch.zeros(2, dtype=torch.int64), ValueError),
    (torch.zeros(3), torch.zeros(3, dtype=torch.int64), ValueError),
])
def test_toy_dataset_rejects_bad_input(features, labels, error):
    with pytest.raises(error, match="ToyDataset"):
        data.ToyDataset(features, labels)


def test_toy_loaders_batches():
    train_loader, test_loader = data.toy_loaders()
    assert len(train_loader) == 2 and len(test_loader) == 1
    batches = list(train_loader)
    assert [len(labels) for _, labels in batches] == [2, 2]  # the 5th example is dropped


def test_toy_loaders_reproduce_the_appendix_log():
    """torch.manual_seed(123), the appendix's model and SGD(lr=0.5): its exact log."""
    train_loader, _ = data.toy_loaders()
    torch.manual_seed(123)
    model = torch.nn.Sequential(
        torch.nn.Linear(2, 30), torch.nn.ReLU(),
        torch.nn.Linear(30, 20), torch.nn.ReLU(),
        torch.nn.Linear(20, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    lines = []
    for epoch in range(3):
        model.train()
        for batch_idx, (features, labels) in enumerate(train_loader):
            loss = F.cross_entropy(model(features), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            lines.append(f"Epoch: {epoch + 1:03d}/003 | Batch {batch_idx:03d}/"
                         f"{len(train_loader):03d} | Train/Val Loss: {loss.item():.2f}")
    assert lines[0] == "Epoch: 001/003 | Batch 000/002 | Train/Val Loss: 0.75"
    assert [line[-4:] for line in lines] == ["0.75", "0.65", "0.44", "0.13", "0.03", "0.00"]


@pytest.mark.parametrize("batch_size", [0, -2, 1.5, True, "2"])
def test_toy_loaders_reject_bad_batch_size(batch_size):
    with pytest.raises(ValueError, match=f"batch_size must be a positive whole number, got "
                                         f"{batch_size!r}"):
        data.toy_loaders(batch_size)


# ------------------------------------------------------------------ digits

def test_digits_tensors_shapes_range_and_split():
    X_train, y_train, X_test, y_test = data.digits_tensors()
    assert X_train.shape[1] == 64 and X_train.shape[0] + X_test.shape[0] == 1797
    assert X_test.shape[0] == 450  # 25 %
    assert X_train.dtype == torch.float32 and y_train.dtype == torch.int64
    assert 0.0 <= float(X_train.min()) and float(X_train.max()) <= 1.0
    assert float(X_train.max()) == 1.0
    # stratified: each digit has about the same share on both sides
    train_share = torch.bincount(y_train, minlength=10) / len(y_train)
    test_share = torch.bincount(y_test, minlength=10) / len(y_test)
    assert torch.allclose(train_share, test_share, atol=0.01)


def test_digits_split_is_fixed_by_seed():
    first, again, other = data.digits_tensors(), data.digits_tensors(), data.digits_tensors(seed=1)
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert not torch.equal(first[0], other[0])


def test_digits_tensors_on_a_device():
    assert {t.device.type for t in data.digits_tensors(device="meta")} == {"meta"}


@pytest.mark.parametrize("fraction", [0, 1, 1.5, -0.1, "0.2", True])
def test_digits_rejects_bad_test_fraction(fraction):
    with pytest.raises(ValueError, match=f"strictly between 0 and 1, got {fraction!r}"):
        data.digits_tensors(test_fraction=fraction)


def test_digits_rejects_bad_seed():
    with pytest.raises(ValueError, match="seed must be a whole number, got 'a'"):
        data.digits_tensors(seed="a")


def test_digits_loaders_are_repeatable():
    def first_labels():
        train_loader, _ = data.digits_loaders(batch_size=32, seed=3)
        torch.rand(5)  # other random draws do not change the loader's order
        return next(iter(train_loader))[1]

    assert torch.equal(first_labels(), first_labels())
    train_loader, test_loader = data.digits_loaders(batch_size=100)
    assert len(train_loader) == 14 and len(test_loader) == 5


def test_digits_loaders_reject_bad_batch_size():
    with pytest.raises(ValueError, match="batch_size must be a positive whole number, got 0"):
        data.digits_loaders(batch_size=0)


# ------------------------------------------------------------------ random data

def test_regression_data_shapes_seed_and_signal():
    X, y = data.regression_data(50, seed=2)
    assert X.shape == (50, 10) and y.shape == (50, 1) and X.dtype == y.dtype == torch.float32
    X2, y2 = data.regression_data(50, seed=2)
    assert torch.equal(X, X2) and torch.equal(y, y2)
    assert not torch.equal(X, data.regression_data(50, seed=3)[0])
    # y is linear in X plus small noise: least squares leaves little
    design = torch.cat([X, torch.ones(50, 1)], dim=1)
    solution = torch.linalg.lstsq(design, y).solution
    assert float((design @ solution - y).std()) < 0.15


def test_image_data_shapes_labels_and_seed():
    X, y = data.image_data(20, seed=1)
    assert X.shape == (20, 3, 14, 14) and y.shape == (20,)
    assert y.dtype == torch.int64 and 0 <= int(y.min()) and int(y.max()) <= 9
    assert torch.equal(X, data.image_data(20, seed=1)[0])


def test_random_data_leave_the_global_generator_alone():
    state = torch.get_rng_state()
    data.regression_data(10)
    data.image_data(4)
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize("make", [data.regression_data, data.image_data])
def test_random_data_on_a_device(make):
    X, y = make(4, device="meta")
    assert X.device.type == "meta" and y.device.type == "meta"
    X, y = make(4, device=torch.device("cpu"))
    assert X.device.type == "cpu"


@pytest.mark.parametrize("make", [data.regression_data, data.image_data, data.digits_tensors,
                                  data.toy_tensors])
@pytest.mark.parametrize("device, says", [
    ("gpu", "'gpu', which is not a device name"),
    ("cuda:7", "'cuda:7', but no cuda device is available"),
])
def test_bad_devices_are_named(make, device, says, monkeypatch):
    if torch.cuda.is_available():  # pragma: no cover - only on a GPU machine
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match=says) as raised:
        make(device=device)
    assert "Available here: cpu" in str(raised.value)


@pytest.mark.parametrize("make", [data.regression_data, data.image_data])
@pytest.mark.parametrize("n", [0, -1, 2.5, None])
def test_random_data_reject_bad_n(make, n):
    with pytest.raises(ValueError, match=f"n must be a positive whole number, got {n!r}"):
        make(n)


# ------------------------------------------------------------------ TensorBatches

def test_tensor_batches_in_order_cover_everything():
    X, y = torch.arange(10.0).reshape(10, 1), torch.arange(10)
    batches = data.TensorBatches(X, y, batch_size=4)
    assert len(batches) == 3
    assert [labels.tolist() for _, labels in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_tensor_batches_shuffle_is_seeded_and_changes_every_epoch():
    X, y = torch.arange(10.0).reshape(10, 1), torch.arange(10)

    def epochs(seed):
        batches = data.TensorBatches(X, y, batch_size=3, shuffle=True, seed=seed)
        return [torch.cat([labels for _, labels in batches]).tolist() for _ in range(2)]

    first, second = epochs(0)
    assert sorted(first) == list(range(10)) and first != second
    assert epochs(0) == [first, second] and epochs(1) != [first, second]
    for features, labels in data.TensorBatches(X, y, batch_size=3, shuffle=True):
        assert torch.equal(features[:, 0].long(), labels)  # pairs stay together


def test_tensor_batches_stay_on_the_tensors_device():
    X, y = data.image_data(6, device="meta")
    for features, labels in data.TensorBatches(X, y, batch_size=4, shuffle=True):
        assert features.device.type == "meta" and labels.device.type == "meta"


@pytest.mark.parametrize("features, labels, kwargs, error, says", [
    (torch.zeros(4, 2), [0, 1, 0, 1], {}, TypeError, "needs two tensors"),
    (torch.zeros(4, 2), torch.zeros(3), {}, ValueError,
     r"same first dimension; got shapes \(4, 2\) and \(3,\)"),
    (torch.zeros(4, 2), torch.zeros(4, device="meta"), {}, ValueError, "on one device"),
    (torch.zeros(4, 2), torch.zeros(4), {"batch_size": 0}, ValueError, "got 0"),
    (torch.zeros(4, 2), torch.zeros(4), {"drop_last": "yes"}, TypeError,
     "drop_last must be True or False, got 'yes'"),
    (torch.zeros(4, 2), torch.zeros(4), {"shuffle": 1}, TypeError,
     "shuffle must be True or False, got 1"),
    (torch.zeros(4, 2), torch.zeros(4), {"seed": 0.5}, ValueError,
     "seed must be a whole number, got 0.5"),
])
def test_tensor_batches_reject_bad_input(features, labels, kwargs, error, says):
    with pytest.raises(error, match=says):
        data.TensorBatches(features, labels, **kwargs)


def index_coded(n):
    """Features whose every entry is the example's index, and labels equal to it."""
    return torch.arange(n, dtype=torch.float32).repeat_interleave(3).reshape(n, 3), torch.arange(n)


@pytest.mark.parametrize("n, batch_size, drop_last, sizes", [
    (10, 4, False, [4, 4, 2]),
    (10, 4, True, [4, 4]),
    (8, 4, False, [4, 4]),
    (8, 4, True, [4, 4]),
    (3, 4, False, [3]),
    (3, 4, True, []),
])
@pytest.mark.parametrize("shuffle", [False, True])
def test_tensor_batches_keep_the_last_batch_unless_told(n, batch_size, drop_last, sizes, shuffle):
    X, y = index_coded(n)
    batches = data.TensorBatches(X, y, batch_size, shuffle=shuffle, drop_last=drop_last)
    for _ in range(2):
        got = [labels.tolist() for _, labels in batches]
        assert [len(labels) for labels in got] == sizes and len(batches) == len(sizes)
        seen = [label for labels in got for label in labels]
        assert len(set(seen)) == len(seen) == sum(sizes)  # each example at most once
        if not drop_last:
            assert sorted(seen) == list(range(n))  # ... and exactly once when none is dropped


def test_tensor_batches_ignore_the_global_random_generator():
    X, y = index_coded(20)

    def order(disturb):
        batches = data.TensorBatches(X, y, batch_size=6, shuffle=True, seed=4)
        epochs = []
        for _ in range(3):
            if disturb:
                torch.rand(3)  # someone else draws random numbers between epochs
            epochs.append(torch.cat([labels for _, labels in batches]).tolist())
        return epochs

    state = torch.get_rng_state()
    assert order(False) == order(True)
    assert len({tuple(epoch) for epoch in order(False)}) == 3  # a new order every epoch
    torch.set_rng_state(state)


def test_tensor_batches_drop_different_examples_each_epoch_when_shuffled():
    X, y = index_coded(10)
    batches = data.TensorBatches(X, y, batch_size=4, shuffle=True, seed=0, drop_last=True)
    dropped = [set(range(10)) - {int(v) for _, labels in batches for v in labels}
               for _ in range(4)]
    assert all(len(missing) == 2 for missing in dropped)
    assert len({frozenset(missing) for missing in dropped}) > 1


def test_tensor_batches_in_order_are_views_of_the_data():
    X, y = index_coded(10)
    features, labels = next(iter(data.TensorBatches(X, y, batch_size=4)))
    assert features.data_ptr() == X.data_ptr() and labels.data_ptr() == y.data_ptr()


@pytest.mark.gpu
def test_tensor_batches_stay_on_the_gpu():
    X, y = index_coded(50)
    X, y = X.to("cuda"), y.to("cuda")
    batches = data.TensorBatches(X, y, batch_size=16, shuffle=True, seed=0)
    seen = []
    for features, labels in batches:
        assert features.device.type == "cuda" and labels.device.type == "cuda"
        assert torch.equal(features[:, 0].long(), labels)
        seen += labels.tolist()
    assert sorted(seen) == list(range(50)) and len(batches) == 4
