"""course_utils.lab.training and course_utils.lab.plots: the loop's behaviour, its errors and
its plot."""
from __future__ import annotations

import math
import sys

import matplotlib

matplotlib.use("Agg")

import pytest
import torch
from matplotlib.figure import Figure

from course_utils import data, training
from course_utils.lab.plots import plot_history


def digits_setup(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    train_loader, test_loader = data.digits_loaders(batch_size=128, seed=seed)
    return model, optimizer, train_loader, test_loader


# ------------------------------------------------------------------ fit

def test_fit_learns_digits_and_records_history():
    model, optimizer, train_loader, test_loader = digits_setup()
    history = training.fit(model, train_loader, torch.nn.CrossEntropyLoss(), optimizer, epochs=4,
                           device="cpu", val_loader=test_loader)
    assert history.epochs == 4 and history.device == "cpu"
    assert len(history.val_loss) == len(history.val_accuracy) == len(history.seconds) == 4
    assert all(isinstance(value, float) for value in history.train_loss + history.val_accuracy)
    assert history.train_loss[-1] < history.train_loss[0]
    assert history.val_accuracy[-1] > 0.85
    assert all(seconds > 0 for seconds in history.seconds)
    assert history.val_accuracy[-1] == pytest.approx(training._accuracy(model, test_loader, "cpu"))


def test_fit_train_loss_is_the_mean_over_examples():
    """With lr=0 the weights stay put, so the epoch's loss is the plain mean loss."""
    X, y = data.regression_data(10, seed=1)
    model = torch.nn.Linear(10, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    history = training.fit(model, data.TensorBatches(X, y, batch_size=4), torch.nn.MSELoss(),
                           optimizer, epochs=1, device="cpu")
    with torch.no_grad():
        expected = torch.nn.functional.mse_loss(model(X), y).item()
    assert history.train_loss == [pytest.approx(expected, rel=1e-6)]
    assert history.val_loss == [] and history.val_accuracy == []


def test_fit_regression_validation_has_no_accuracy():
    X, y = data.regression_data(40, seed=0)
    model = torch.nn.Linear(10, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    batches = data.TensorBatches(X, y, batch_size=8, shuffle=True)
    history = training.fit(model, batches, torch.nn.MSELoss(), optimizer, epochs=5,
                           device="cpu", val_loader=batches)
    assert history.val_loss[-1] < history.val_loss[0]
    assert all(math.isnan(value) for value in history.val_accuracy)


def test_fit_moves_model_once_and_batches_every_step():
    """The model is moved once; every batch is moved inside the loop; modes are set."""
    model, optimizer, _, _ = digits_setup()
    moves, modes, grads = [], [], []
    original_to = model.to

    def counting_to(*args, **kwargs):
        moves.append(args)
        return original_to(*args, **kwargs)

    model.to = counting_to
    def record(module, args):
        modes.append(module.training)
        grads.append(torch.is_grad_enabled())

    model.register_forward_pre_hook(record)
    X, y = data.digits_tensors()[:2]
    batches = data.TensorBatches(X[:64], y[:64], batch_size=32)
    training.fit(model, batches, torch.nn.CrossEntropyLoss(), optimizer, epochs=2, device="cpu",
                 val_loader=batches)
    assert len(moves) == 1
    # per epoch: 2 training forwards (train mode, autograd on), 2 validation forwards (off)
    assert modes == [True, True, False, False] * 2
    assert grads == [True, True, False, False] * 2


def test_fit_zeroes_gradients_every_step():
    model, optimizer, _, _ = digits_setup()
    stale = []
    weight = model[0].weight
    weight.register_hook(lambda grad: stale.append(weight.grad is not None))
    X, y = data.digits_tensors()[:2]
    training.fit(model, data.TensorBatches(X[:96], y[:96], batch_size=32),
                 torch.nn.CrossEntropyLoss(), optimizer, epochs=1, device="cpu")
    assert stale == [False, False, False]  # set_to_none=True: no old gradient is left


def test_fit_sends_batches_to_the_device():
    """On the meta device, every batch must arrive on meta; stop at the first forward."""

    class Seen(Exception):
        pass

    devices = []
    with torch.device("meta"):
        model = torch.nn.Linear(64, 10)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def stop(module, args):
        devices.append(args[0].device.type)
        raise Seen()

    model.register_forward_pre_hook(stop)
    train_loader, _ = data.digits_loaders(batch_size=16)
    with pytest.raises(Seen):
        training.fit(model, train_loader, torch.nn.CrossEntropyLoss(), optimizer, 1,
                     device="meta")
    assert devices == ["meta"]


@pytest.mark.parametrize("epochs", [0, -1, 1.5, True, "3"])
def test_fit_rejects_bad_epochs(epochs):
    model, optimizer, train_loader, _ = digits_setup()
    with pytest.raises(ValueError, match=f"epochs must be a positive whole number, got "
                                         f"{epochs!r}"):
        training.fit(model, train_loader, torch.nn.CrossEntropyLoss(), optimizer, epochs)


@pytest.mark.parametrize("device, says", [
    ("gpu", "fit\\(device=...\\) asks for device 'gpu', which is not a device name"),
    ("cuda:3", "no cuda device is available"),
])
def test_fit_names_a_bad_device(device, says):
    if torch.cuda.is_available():  # pragma: no cover - only on a GPU machine
        pytest.skip("this machine has CUDA")
    model, optimizer, train_loader, _ = digits_setup()
    with pytest.raises(ValueError, match=says):
        training.fit(model, train_loader, torch.nn.CrossEntropyLoss(), optimizer, 1,
                     device=device)


def test_fit_rejects_bad_arguments():
    model, optimizer, train_loader, _ = digits_setup()
    loss_fn = torch.nn.CrossEntropyLoss()
    with pytest.raises(TypeError, match="model must be a torch.nn.Module, got function"):
        training.fit(lambda x: x, train_loader, loss_fn, optimizer, 1)
    with pytest.raises(TypeError, match="train_loader must be an iterable .* got Tensor"):
        training.fit(model, torch.zeros(3), loss_fn, optimizer, 1)
    with pytest.raises(TypeError, match="loss_fn must be callable"):
        training.fit(model, train_loader, "cross_entropy", optimizer, 1)
    with pytest.raises(TypeError, match="optimizer must be a torch.optim.Optimizer, got list"):
        training.fit(model, train_loader, loss_fn, [0.1], 1, device="cpu")
    other = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
    with pytest.raises(ValueError, match="updates none of this model's parameters"):
        training.fit(model, train_loader, loss_fn, other, 1, device="cpu")
    with pytest.raises(ValueError, match="yielded no batches"):
        training.fit(model, [], loss_fn, optimizer, 1, device="cpu")
    with pytest.raises(ValueError, match=r"pair \(inputs, targets\); got a tuple of 3 items"):
        training.fit(model, [(torch.zeros(2, 64), torch.zeros(2), torch.zeros(2))], loss_fn,
                     optimizer, 1, device="cpu")
    with pytest.raises(ValueError, match="progress must be True, False or None"):
        training.fit(model, train_loader, loss_fn, optimizer, 1, progress="yes")


def test_fit_uses_get_device_by_default():
    model, optimizer, train_loader, _ = digits_setup()
    history = training.fit(model, train_loader, torch.nn.CrossEntropyLoss(), optimizer, 1)
    from course_utils import get_device

    assert history.device == str(get_device())


# ------------------------------------------------------------------ evaluate

def test_evaluate_counts_correct_examples_in_eval_mode_without_autograd():
    model = torch.nn.Sequential(torch.nn.Dropout(0.9), torch.nn.Identity())
    features = torch.eye(3)[[0, 1, 2, 0, 1]]  # one-hot scores: the argmax is the position
    labels = torch.tensor([0, 1, 2, 1, 1])
    seen = []

    def record(module, args):
        seen.append((module.training, torch.is_grad_enabled()))

    model.register_forward_pre_hook(record)
    model.train()
    accuracy = training._accuracy(model, data.TensorBatches(features, labels, 2), "cpu")
    assert accuracy == pytest.approx(4 / 5) and isinstance(accuracy, float)
    assert set(seen) == {(False, False)}


def test_evaluate_rejects_bad_input():
    model = torch.nn.Linear(10, 1)
    X, y = data.regression_data(8)
    with pytest.raises(ValueError, match="classification accuracy"):
        training._accuracy(model, data.TensorBatches(X, y, 4), "cpu")
    with pytest.raises(ValueError, match="yielded no examples"):
        training._accuracy(model, [], "cpu")
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        training._accuracy("model", [], "cpu")
    with pytest.raises(ValueError, match="accuracy\\(device=...\\) asks for device 'tpu0'"):
        training._accuracy(model, [], "tpu0")


# ------------------------------------------------------------------ progress bar

def test_progress_bar_is_plain_text_that_ends_complete(capsys):
    """Checks the bar is text on stdout whose last state reads 3/3 epochs (no widget)."""
    model, optimizer, train_loader, _ = digits_setup()
    training.fit(model, train_loader, torch.nn.CrossEntropyLoss(), optimizer, epochs=3,
                 device="cpu", progress=True)
    out = capsys.readouterr().out
    final = out.replace("\r", "\n").strip().splitlines()[-1]
    assert final.startswith("training on cpu: 100%") and "3/3" in final and "train_loss=" in final
    assert "HBox" not in out and "IntProgress" not in out


def test_progress_is_off_under_pytest_and_ci(monkeypatch):
    assert training.progress_enabled(None) is False  # PYTEST_CURRENT_TEST is set
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.setenv("CI", "true")
    assert training.progress_enabled(None) is False
    assert training.progress_enabled(True) is True and training.progress_enabled(False) is False


def test_progress_auto_follows_the_terminal(monkeypatch):
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(training, "_in_jupyter_kernel", lambda: False)

    class Stream:
        def __init__(self, tty):
            self.tty = tty

        def isatty(self):
            return self.tty

    monkeypatch.setattr(sys, "stdout", Stream(False))
    assert training.progress_enabled(None) is False
    monkeypatch.setattr(sys, "stdout", Stream(True))
    assert training.progress_enabled(None) is True
    monkeypatch.setattr(sys, "stdout", Stream(False))
    monkeypatch.setattr(training, "_in_jupyter_kernel", lambda: True)
    assert training.progress_enabled(None) is True
    monkeypatch.setenv("CI", "0")  # CI=0 means "not CI"
    assert training.progress_enabled(None) is True


def test_fit_prints_nothing_without_progress(capsys):
    model, optimizer, train_loader, _ = digits_setup()
    training.fit(model, train_loader, torch.nn.CrossEntropyLoss(), optimizer, 1, device="cpu")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


# ------------------------------------------------------------------ plot_history

def test_plot_history_draws_loss_and_accuracy(tmp_path):
    history = training.History(train_loss=[1.0, 0.5, 0.3], val_loss=[1.1, 0.6, 0.4],
                               val_accuracy=[0.5, 0.8, 0.9], seconds=[0.1, 0.1, 0.1])
    fig = plot_history(history)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    loss_ax, accuracy_ax = fig.axes
    assert [line.get_label() for line in loss_ax.get_lines()] == ["training", "validation"]
    assert list(accuracy_ax.get_lines()[0].get_ydata()) == [0.5, 0.8, 0.9]
    fig.savefig(tmp_path / "history.png")
    assert (tmp_path / "history.png").stat().st_size > 0


def test_plot_history_without_validation_has_one_panel():
    fig = plot_history(training.History(train_loss=[2.0, 1.0], seconds=[0.1, 0.1]))
    assert len(fig.axes) == 1 and len(fig.axes[0].get_lines()) == 1


def test_plot_history_rejects_bad_input():
    with pytest.raises(TypeError, match="needs the History returned by fit\\(\\), got dict"):
        plot_history({"train_loss": [1.0]})
    with pytest.raises(ValueError, match="no epochs"):
        plot_history(training.History())
