"""A small, device-agnostic training loop for the lessons: :func:`fit`.

It is the loop lesson 02 builds by hand, packaged so that later lessons can
focus on what they change:

* the model is moved to the device once; each batch is moved inside the loop;
* ``model.train()`` for training, ``model.eval()`` and ``torch.inference_mode()``
  for evaluation;
* ``optimizer.zero_grad(set_to_none=True)`` before every backward pass;
* losses are logged with ``loss.item()`` (a Python float), never by adding up loss
  tensors: after ``backward()`` each kept loss still holds its graph's nodes in host memory,
  and where no backward runs (evaluation with autograd on) its saved activations too.
"""
from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch

from .args import positive_int
from .devices import resolve, synchronize

__all__ = ["History", "fit", "progress_enabled"]


@dataclass
class History:
    """What :func:`fit` measured, one entry per epoch.

    ``val_loss`` and ``val_accuracy`` stay empty when ``fit`` had no ``val_loader``;
    ``val_accuracy`` holds ``nan`` for epochs where the task is not classification
    (targets that are not integer class labels).
    """

    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    val_accuracy: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    device: str = "cpu"

    @property
    def epochs(self) -> int:
        """How many epochs were recorded."""
        return len(self.train_loss)


# ------------------------------------------------------------------ progress bar

def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _in_jupyter_kernel() -> bool:
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - ipykernel always brings IPython
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def progress_enabled(progress: bool | None = None) -> bool:
    """Whether :func:`fit` shows a progress bar.

    ``True``/``False`` are obeyed. ``None`` (auto) shows one only for a person
    watching: never under pytest or when the ``CI`` environment variable is set,
    otherwise in a Jupyter kernel or when stdout is a terminal.
    """
    if progress is not None:
        if not isinstance(progress, bool):
            raise ValueError(f"progress must be True, False or None (auto), got {progress!r}.")
        return progress
    if _env_flag("CI") or "PYTEST_CURRENT_TEST" in os.environ:
        return False
    if _in_jupyter_kernel():
        return True
    isatty = getattr(sys.stdout, "isatty", None)
    return bool(isatty and isatty())


# ------------------------------------------------------------------ checks of arguments

def _check_model(model) -> None:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}.")


def _check_loader(loader, name: str) -> None:
    if isinstance(loader, torch.Tensor) or not isinstance(loader, Iterable):
        raise TypeError(
            f"{name} must be an iterable of (inputs, targets) batches such as a DataLoader, "
            f"got {type(loader).__name__}.")


def _split_batch(batch, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        what = f"a {type(batch).__name__}" + (
            f" of {len(batch)} items" if isinstance(batch, (tuple, list)) else "")
        raise ValueError(f"each batch of {name} must be a pair (inputs, targets); got {what}.")
    return batch[0], batch[1]


def _check_optimizer(optimizer, model: torch.nn.Module) -> None:
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}.")
    owned = {id(p) for p in model.parameters()}
    updated = [p for group in optimizer.param_groups for p in group["params"]]
    if updated and not any(id(p) in owned for p in updated):
        raise ValueError(
            "the optimizer updates none of this model's parameters (it was built for another "
            "model, or the model's parameters were replaced when it moved). Create the optimizer "
            "from model.parameters(), after model.to(device) if the move replaces them.")


# ------------------------------------------------------------------ the loop

def _run_eval(model, loader, device, loss_fn=None) -> tuple[float, float]:
    """Mean loss (nan without ``loss_fn``) and accuracy (nan if not classification)."""
    model.eval()
    total_loss, correct, seen, classified = 0.0, 0, 0, True
    with torch.inference_mode():
        for batch in loader:
            inputs, targets = _split_batch(batch, "the evaluation loader")
            inputs, targets = inputs.to(device), targets.to(device)
            outputs = model(inputs)
            n = targets.shape[0]
            if loss_fn is not None:
                total_loss += loss_fn(outputs, targets).item() * n
            if classified and outputs.ndim == 2 and not targets.is_floating_point() \
                    and targets.ndim == 1:
                correct += (outputs.argmax(dim=1) == targets).sum().item()
            else:
                classified = False
            seen += n
    if seen == 0:
        raise ValueError("the evaluation loader yielded no examples.")
    mean_loss = total_loss / seen if loss_fn is not None else math.nan
    return mean_loss, (correct / seen if classified else math.nan)


def _accuracy(model: torch.nn.Module, loader: Iterable, device=None) -> float:
    """Classification accuracy of ``model`` on ``loader``: a float in [0, 1].

    Not offered to learners: lesson 02's exercise 2 (``evaluate``) asks them to write it, and
    the lesson measures accuracy with theirs (tests/test_exercises_not_in_lab.py).

    The model is moved to ``device`` (default :func:`get_device`) and put in eval mode
    (dropout off, batch norm uses its running statistics); batches run under
    ``torch.inference_mode()`` so no autograd graph is recorded. The model is left in
    eval mode.
    """
    _check_model(model)
    _check_loader(loader, "loader")
    device = resolve(device, "accuracy")
    model.to(device)
    _, accuracy = _run_eval(model, loader, device)
    if math.isnan(accuracy):
        raise ValueError(
            "accuracy: it measures classification accuracy, so the model must output "
            "(batch, classes) scores and the loader must give integer class labels of shape "
            "(batch,).")
    return accuracy


def fit(model: torch.nn.Module, train_loader: Iterable, loss_fn: Callable, optimizer,
        epochs: int, device=None, val_loader: Iterable | None = None,
        progress: bool | None = None) -> History:
    """Train ``model`` for ``epochs`` epochs and return a :class:`History`.

    ``loss_fn(outputs, targets)`` must return the batch's mean loss (the default of
    PyTorch's losses); the epoch's ``train_loss`` is the mean over all examples.
    With ``val_loader``, each epoch ends with the validation loss and accuracy.
    ``device`` defaults to :func:`get_device`. ``progress``: see :func:`progress_enabled`.
    """
    _check_model(model)
    _check_loader(train_loader, "train_loader")
    if val_loader is not None:
        _check_loader(val_loader, "val_loader")
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable, e.g. torch.nn.CrossEntropyLoss(); got "
                        f"{type(loss_fn).__name__}.")
    positive_int(epochs, "epochs", "fit")
    show = progress_enabled(progress)
    device = resolve(device, "fit")

    model.to(device)  # once, before the loop
    _check_optimizer(optimizer, model)
    history = History(device=str(device))

    # tqdm's plain-text bar, not its notebook widget: a widget is saved as a frozen "0%" and
    # needs a CDN in HTML, while text keeps its final state in the saved notebook and in HTML.
    from tqdm.std import trange

    bar = trange(epochs, desc=f"training on {device}", unit="epoch", disable=not show,
                 file=sys.stdout, ncols=100, ascii=True, mininterval=0.5)
    for _ in bar:
        synchronize(device)
        start = time.perf_counter()
        model.train()
        total, seen = 0.0, 0
        for batch in train_loader:
            inputs, targets = _split_batch(batch, "train_loader")
            inputs, targets = inputs.to(device), targets.to(device)
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            optimizer.step()
            n = targets.shape[0]
            total += loss.item() * n  # a float: nothing of this batch's graph is kept
            seen += n
        if seen == 0:
            raise ValueError("train_loader yielded no batches: check its length and batch_size.")
        history.train_loss.append(total / seen)
        postfix = {"train_loss": f"{total / seen:.4f}"}
        if val_loader is not None:
            val_loss, val_accuracy = _run_eval(model, val_loader, device, loss_fn)
            history.val_loss.append(val_loss)
            history.val_accuracy.append(val_accuracy)
            postfix["val_acc"] = f"{val_accuracy:.3f}"
        synchronize(device)
        history.seconds.append(time.perf_counter() - start)
        bar.set_postfix(postfix)
    bar.close()
    return history
