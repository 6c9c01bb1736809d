"""Small data sets for the lessons: built in memory, seeded, nothing downloaded.

* the toy two-feature classification data of the LLMs-from-scratch appendix
  (:func:`toy_tensors`, :class:`ToyDataset`, :func:`toy_loaders`);
* scikit-learn's handwritten digits, which ship with the package
  (:func:`digits_tensors`, :func:`digits_loaders`);
* random regression data and random 14x14 "images" (:func:`regression_data`,
  :func:`image_data`);
* :class:`TensorBatches`, a loader over tensors that already sit on the device.

Every function returns tensors on the CPU unless it is given a ``device``: data are made
once and moved where the caller says, so their default is the CPU, not :func:`get_device`.
"""
from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from .args import is_real, is_whole, positive_int
from .devices import resolve

__all__ = [
    "TensorBatches",
    "ToyDataset",
    "digits_loaders",
    "digits_tensors",
    "image_data",
    "regression_data",
    "toy_loaders",
    "toy_tensors",
]

CPU = torch.device("cpu")  # where the data are made unless a device is given

# The appendix's data: class 0 sits top left, class 1 bottom right.
_TOY_X_TRAIN = [[-1.2, 3.1], [-0.9, 2.9], [-0.5, 2.6], [2.3, -1.1], [2.7, -1.5]]
_TOY_Y_TRAIN = [0, 0, 0, 1, 1]
_TOY_X_TEST = [[-0.8, 2.8], [2.6, -1.6]]
_TOY_Y_TEST = [0, 1]


# ------------------------------------------------------------------ validation

def _seed(value, function: str) -> int:
    if not is_whole(value):
        raise ValueError(
            f"{function}: seed must be a whole number, got {value!r}.")
    return value


# ------------------------------------------------------------------ toy data

def toy_tensors(device=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The appendix's toy data: ``(X_train, y_train, X_test, y_test)``, on ``device``
    (default: the CPU).

    Shapes (5, 2), (5,), (2, 2) and (2,); features are float32, labels int64 (what
    ``F.cross_entropy`` expects). Each call returns new tensors, so changing them in
    place changes nothing here.
    """
    where = resolve(device, "toy_tensors", default=CPU)
    return (
        torch.tensor(_TOY_X_TRAIN, device=where),
        torch.tensor(_TOY_Y_TRAIN, device=where),
        torch.tensor(_TOY_X_TEST, device=where),
        torch.tensor(_TOY_Y_TEST, device=where),
    )


class ToyDataset(Dataset):
    """A map-style dataset over a feature matrix and a label vector of the same length."""

    def __init__(self, features: torch.Tensor, labels: torch.Tensor):
        if not isinstance(features, torch.Tensor) or not isinstance(labels, torch.Tensor):
            raise TypeError(
                f"ToyDataset needs two tensors, got {type(features).__name__} and "
                f"{type(labels).__name__}.")
        if features.ndim != 2 or labels.ndim != 1 or features.shape[0] != labels.shape[0]:
            raise ValueError(
                f"ToyDataset needs features of shape (n, k) and labels of shape (n,); got "
                f"{tuple(features.shape)} and {tuple(labels.shape)}.")
        self.features = features
        self.labels = labels

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.features[index], self.labels[index]

    def __len__(self) -> int:
        return self.labels.shape[0]


def toy_loaders(batch_size: int = 2) -> tuple[DataLoader, DataLoader]:
    """Loaders over the toy data: ``(train_loader, test_loader)``.

    The training loader shuffles and drops the last incomplete batch, so with the
    default ``batch_size=2`` it yields 2 batches of 2 out of the 5 examples. Its
    shuffling draws from PyTorch's global random generator when you iterate, so
    ``torch.manual_seed(123)`` before building the model, as in the appendix,
    reproduces the appendix's log (first line ``Train/Val Loss: 0.75``).
    """
    positive_int(batch_size, "batch_size", "toy_loaders")
    X_train, y_train, X_test, y_test = toy_tensors()
    train_loader = DataLoader(ToyDataset(X_train, y_train), batch_size=batch_size,
                              shuffle=True, drop_last=True, num_workers=0)
    test_loader = DataLoader(ToyDataset(X_test, y_test), batch_size=batch_size,
                             shuffle=False, num_workers=0)
    return train_loader, test_loader


# ------------------------------------------------------------------ digits

def digits_tensors(test_fraction: float = 0.25, seed: int = 0, device=None
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """scikit-learn's 8x8 digits as ``(X_train, y_train, X_test, y_test)``, on ``device``
    (default: the CPU).

    1,797 images flattened to 64 float32 features scaled to [0, 1] (the raw pixels
    are 0..16), labels 0..9 as int64. The split is stratified (every digit in the
    same proportion on both sides) and fixed by ``seed``. With ``device``, all four
    tensors are created there in one transfer each.
    """
    if not is_real(test_fraction) or not 0 < test_fraction < 1:
        raise ValueError(
            f"digits_tensors: test_fraction must be a number strictly between 0 and 1, "
            f"got {test_fraction!r}.")
    _seed(seed, "digits_tensors")
    where = resolve(device, "digits_tensors", default=CPU)
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    X_train, X_test, y_train, y_test = train_test_split(
        digits.data, digits.target, test_size=test_fraction, random_state=seed,
        stratify=digits.target)

    def features(array):
        return torch.as_tensor(array / 16.0, dtype=torch.float32).to(where)

    def labels(array):
        return torch.as_tensor(array, dtype=torch.int64).to(where)

    return features(X_train), labels(y_train), features(X_test), labels(y_test)


def digits_loaders(batch_size: int = 64, test_fraction: float = 0.25, seed: int = 0
                   ) -> tuple[DataLoader, DataLoader]:
    """DataLoaders over :func:`digits_tensors` (on the CPU): ``(train_loader, test_loader)``.

    The training loader reshuffles every epoch with its own generator seeded by
    ``seed``, so runs are repeatable whatever else draws random numbers.
    """
    positive_int(batch_size, "batch_size", "digits_loaders")
    X_train, y_train, X_test, y_test = digits_tensors(test_fraction, seed)
    generator = torch.Generator().manual_seed(seed)
    train_loader = DataLoader(TensorDataset(X_train, y_train), batch_size=batch_size,
                              shuffle=True, generator=generator)
    test_loader = DataLoader(TensorDataset(X_test, y_test), batch_size=batch_size)
    return train_loader, test_loader


# ------------------------------------------------------------------ random data

def regression_data(n: int = 100, seed: int = 0, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Random regression data: ``X`` of shape (n, 10) and ``y`` of shape (n, 1), float32, on
    ``device`` (default: the CPU).

    ``X`` is standard normal and ``y = X @ w + b + noise`` for a fixed random ``w``
    and ``b`` drawn from ``seed`` (noise std 0.1), so a linear model can fit it.
    """
    positive_int(n, "n", "regression_data")
    _seed(seed, "regression_data")
    where = resolve(device, "regression_data", default=CPU)
    generator = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 10, generator=generator)
    w = torch.randn(10, 1, generator=generator)
    b = torch.randn(1, generator=generator)
    y = X @ w + b + 0.1 * torch.randn(n, 1, generator=generator)
    return X.to(where), y.to(where)


def image_data(n: int = 32, seed: int = 0, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Random "images": ``X`` of shape (n, 3, 14, 14) float32 and labels ``y`` (n,) in 0..9, on
    ``device`` (default: the CPU).

    Pixels and labels are independent noise: a model can memorise them but cannot
    learn anything that carries over to new images. Good for checking shapes,
    devices and speed, not accuracy.
    """
    positive_int(n, "n", "image_data")
    _seed(seed, "image_data")
    where = resolve(device, "image_data", default=CPU)
    generator = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 3, 14, 14, generator=generator)
    y = torch.randint(0, 10, (n,), generator=generator)
    return X.to(where), y.to(where)


# ------------------------------------------------------------------ in-memory batches

class TensorBatches:
    """Batches cut from tensors that are already where the model is: a DataLoader for data that fit.

    Use it instead of a DataLoader when the whole data set fits in the device's memory: the
    data were moved once, and each batch is one indexing operation on the device, with no
    per-example ``__getitem__``, no collate and no copy from the host per batch.

    ``TensorBatches(X, y, batch_size=64, shuffle=True, seed=0)`` yields ``(X[idx], y[idx])``
    pairs on ``X``'s device. As with a DataLoader:

    * every example appears exactly once per epoch; the last, smaller batch is kept unless
      ``drop_last=True``;
    * with ``shuffle`` the order is new every epoch, drawn from a generator of its own seeded
      by ``seed``: the same seed gives the same sequence of epochs, whatever else draws
      random numbers;
    * ``len()`` is the number of batches per epoch.
    """

    def __init__(self, features: torch.Tensor, labels: torch.Tensor, batch_size: int = 64,
                 shuffle: bool = False, seed: int = 0, drop_last: bool = False):
        if not isinstance(features, torch.Tensor) or not isinstance(labels, torch.Tensor):
            raise TypeError(
                f"TensorBatches needs two tensors, got {type(features).__name__} and "
                f"{type(labels).__name__}.")
        if features.ndim == 0 or labels.ndim == 0 or features.shape[0] != labels.shape[0]:
            raise ValueError(
                f"TensorBatches needs features and labels with the same first dimension; got "
                f"shapes {tuple(features.shape)} and {tuple(labels.shape)}.")
        if features.device != labels.device:
            raise ValueError(
                f"TensorBatches needs features and labels on one device; got "
                f"{features.device} and {labels.device}.")
        for name, flag in (("shuffle", shuffle), ("drop_last", drop_last)):
            if not isinstance(flag, bool):
                raise TypeError(f"TensorBatches: {name} must be True or False, got {flag!r}.")
        self.features = features
        self.labels = labels
        self.batch_size = positive_int(batch_size, "batch_size", "TensorBatches")
        self.shuffle = shuffle
        self.drop_last = drop_last
        # One generator for the object's life: each epoch draws the next permutation from it,
        # so epochs differ, and the sequence depends on the seed alone.
        self._generator = torch.Generator().manual_seed(_seed(seed, "TensorBatches"))

    def __len__(self) -> int:
        n = self.features.shape[0]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        n = self.features.shape[0]
        end = len(self) * self.batch_size if self.drop_last else n
        if self.shuffle:
            # Drawn on the CPU (the same order on every device), then sent in one small copy.
            order = torch.randperm(n, generator=self._generator).to(self.features.device)
            for start in range(0, end, self.batch_size):
                index = order[start:start + self.batch_size]
                yield self.features[index], self.labels[index]
        else:  # slices are views: no copy at all
            for start in range(0, end, self.batch_size):
                yield (self.features[start:start + self.batch_size],
                       self.labels[start:start + self.batch_size])
