"""What a run leaves that its ranks cannot simply assert: rank 0's checkpoint, read as numbers.

A rank's report (records.RankReport) is written by the rank's own process, where the learner's
script runs: the script can rewrite it. The checkpoint is also written by the script, but the
only checkpoint that agrees with the batches the reports list is one holding the weights that
training on those batches reaches, on data the script could not know before the run: a
grader recomputes those weights itself (:func:`unconfirmed`) and believes the reports only
when they agree.
"""
from __future__ import annotations

import io
import os
import pickle
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from ...lab.distributed import RankReport, RunConfig, max_difference
from ...probe import parameter_values
from .reference import global_steps, reference_parameters

# The course model's state_dict keys, in the order of model.parameters().
MODEL_KEYS = ("0.weight", "0.bias", "2.weight", "2.bias")
MAX_CHECKPOINT_BYTES = 2**20  # the course model's checkpoint takes about 2 kB
TOLERANCE = 1e-4  # float32 SGD here and in the ranks: the same steps, summed in another order


@dataclass(frozen=True)
class CheckpointFacts:
    """What a checkpoint file held: ``kind`` is 'state_dict', 'module' (a whole pickled model),
    'other', 'missing' or 'unreadable'; ``parameters`` the model's weights when it held them."""

    kind: str
    keys: list | None = None
    parameters: list | None = None
    problem: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def read_checkpoint(path: str | Path) -> CheckpointFacts:
    """Read a checkpoint without trusting it: a regular file (no link followed) of at most
    MAX_CHECKPOINT_BYTES, unpickled with ``weights_only`` (tensors and containers; of classes,
    only the course model's Sequential, Linear and ReLU), never executing code from it."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        handle = os.open(path, flags)
    except FileNotFoundError:
        return CheckpointFacts("missing", problem="no file")
    except OSError as error:  # a symbolic link, say
        return CheckpointFacts("unreadable", problem=f"{type(error).__name__}: not a plain file")
    with os.fdopen(handle, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_CHECKPOINT_BYTES:
            return CheckpointFacts("unreadable", problem="not a plain file of at most 1 MiB")
        data = file.read(MAX_CHECKPOINT_BYTES + 1)
    model_classes: list = [torch.nn.Sequential, torch.nn.Linear, torch.nn.ReLU]
    try:
        with torch.serialization.safe_globals(model_classes):
            saved = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        if isinstance(saved, torch.nn.Module):
            kind, state = "module", saved.state_dict()
        elif isinstance(saved, dict):
            kind, state = "state_dict", saved
        else:
            return CheckpointFacts("other", problem=type(saved).__name__)
    except (pickle.UnpicklingError, RuntimeError, ValueError, TypeError, EOFError, KeyError,
            AttributeError, RecursionError) as error:
        return CheckpointFacts("unreadable", problem=type(error).__name__)
    keys = [str(key) for key in state]
    plain = {key.removeprefix("module."): value for key, value in zip(keys, state.values(),
                                                                         strict=True)}
    if not all(isinstance(plain.get(key), torch.Tensor) for key in MODEL_KEYS):
        return CheckpointFacts(kind, keys)
    # A tensor's size on disk is its storage's: a view with stride 0 of a few bytes can claim
    # billions of elements, which lists of numbers would then hold. Bound what each expands to.
    if any(plain[key].numel() * 8 > MAX_CHECKPOINT_BYTES for key in MODEL_KEYS):
        return CheckpointFacts("unreadable", keys, problem="a tensor expands past 1 MiB")
    return CheckpointFacts(kind, keys, [plain[key].detach().double().tolist()
                                        for key in MODEL_KEYS])


def unconfirmed(ranks: list[RankReport], config: RunConfig,
                checkpoint: CheckpointFacts) -> str:
    """Why the checkpoint does not confirm the ranks' reports ('' when it does).

    It confirms them when rank 0's reported weights are the checkpoint's, and those are what
    SGD reaches from the starting weights on the batches the ranks reported, either averaged
    over the ranks (DDP) or on rank 0's batches alone (no all-reduce: the reports say so).
    """
    if checkpoint.kind == "missing":
        return ("rank 0 saved no checkpoint at config.checkpoint, and the weights it holds are "
                "what this check judges the training by")
    if checkpoint.parameters is None:
        return (f"the checkpoint at config.checkpoint does not hold the model's weights "
                f"({checkpoint.problem or 'keys ' + str((checkpoint.keys or [])[:4])})")
    start = parameter_values(config.build_model())
    if not _shapes_match(start, checkpoint.parameters):
        return "the checkpoint's tensors do not have the model's shapes"
    claimed = next((report.parameters for report in ranks if report.rank == 0), None)
    if claimed is None or not _shapes_match(claimed, checkpoint.parameters) or \
            max_difference(claimed, checkpoint.parameters) > TOLERANCE:
        return "rank 0's report does not give the weights its checkpoint holds"
    drawn = sum(len(batch) for report in ranks for epoch in report.epochs() for batch in epoch)
    if drawn > 4 * config.epochs * len(config.labels):  # bounds the recomputation below
        return "the reports list more samples than the run could draw"
    saved_keys = [event.get("keys") for report in ranks for event in report.named("save")]
    if checkpoint.kind == "state_dict" and saved_keys and saved_keys[-1] != checkpoint.keys:
        return "the reports name other keys than the checkpoint holds"
    alone = [[batch] for epoch in (ranks[0].epochs() if ranks else []) for batch in epoch]
    for steps in (global_steps(ranks), alone):
        if max_difference(reference_parameters(config, steps),
                          checkpoint.parameters) <= TOLERANCE:
            return ""
    return ("the checkpoint's weights are not what training on the batches the ranks "
            "reported reaches")


def _shapes_match(first: list, second: list) -> bool:
    return len(first) == len(second) and all(
        torch.tensor(a).shape == torch.tensor(b).shape for a, b in zip(first, second, strict=True))
