"""Plots for the lessons. Each function returns a matplotlib Figure and shows nothing itself."""
from __future__ import annotations

import math

from .training import History

__all__ = ["plot_history"]


def plot_history(history: History):
    """Draw a :class:`~course_utils.lab.training.History`: losses per epoch, and accuracy if
    measured.

    Returns the Figure. In a notebook, leave it as the cell's last expression to show it
    once (the figure is closed in pyplot, so it is not drawn a second time); elsewhere,
    ``fig.savefig(path)``. Works with any backend, Agg included.
    """
    if not isinstance(history, History):
        raise TypeError(
            f"plot_history needs the History returned by fit(), got {type(history).__name__}.")
    if history.epochs == 0:
        raise ValueError("plot_history: the history has no epochs to draw.")
    import matplotlib.pyplot as plt

    epochs = list(range(1, history.epochs + 1))
    accuracy = [a for a in history.val_accuracy if not math.isnan(a)]
    n_panels = 2 if accuracy else 1
    fig, axes = plt.subplots(1, n_panels, figsize=(5 * n_panels, 3.5), squeeze=False)
    loss_ax = axes[0][0]
    loss_ax.plot(epochs, history.train_loss, marker="o", label="training")
    if history.val_loss:
        loss_ax.plot(epochs, history.val_loss, marker="o", label="validation")
    loss_ax.set(xlabel="epoch", ylabel="mean loss", title="Loss")
    loss_ax.legend()
    if accuracy:
        acc_ax = axes[0][1]
        acc_ax.plot(epochs, history.val_accuracy, marker="o", color="tab:green")
        acc_ax.set(xlabel="epoch", ylabel="accuracy", title="Validation accuracy",
                   ylim=(0, 1.02))
    for ax in axes[0]:
        ax.grid(alpha=0.3)
        if history.epochs <= 20:
            ax.set_xticks(epochs)
    fig.suptitle(f"{history.epochs} epochs on {history.device}, "
                 f"{sum(history.seconds):.1f} s in all")
    fig.tight_layout()
    plt.close(fig)  # the caller displays or saves it; pyplot must not show it again
    return fig
