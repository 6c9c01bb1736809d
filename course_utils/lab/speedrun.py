"""Lesson 10 (the capstone speedrun): one training run made fast, one change at a time.

* :func:`load_corpus` -- the text: the standard library's own source, read from this Python's
  installation (nothing is downloaded), as byte codes split into training and validation;
  :func:`count_model_losses` -- what counting letters and letter pairs alone scores on it;
* :class:`CharTransformer` -- a small character-level transformer, its attention by hand or
  through ``F.scaled_dot_product_attention``;
* :class:`Recipe` and :func:`cumulative_changes` -- the table's rows, each switch from the lesson
  that taught it, and the rows this machine cannot run, with the reason;
* :func:`train_to_target` -- one run to a fixed validation loss: a :class:`RunRecord`;
* :func:`measure` -- several runs of every row, interleaved so that a change in the machine's
  load falls on every row alike.

What the lesson's exercises ask (a speed-up with its interval, the verdict of Welch's test, a
loop that reads the device rarely) is not here: the notebook fills the table's last columns with
the learner's own functions. The row summaries and the chart are in :mod:`speedrun_report`.
"""
from __future__ import annotations

import math
import sysconfig
import time
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from .args import positive_int, positive_number
from .backends import backend_for
from .devices import resolve, synchronize
from .speedrun_report import Interval, bar_chart, geometric_interval, summary_table

__all__ = ["CORPUS_FILES", "CharTransformer", "Corpus", "Interval", "Recipe", "RunRecord",
           "Skipped", "bar_chart", "count_model_losses", "cumulative_changes",
           "geometric_interval", "load_corpus", "measure", "summary_table", "train_to_target"]

# Standard-library modules present in every supported Python (3.10 and later).
CORPUS_FILES = ("argparse.py", "textwrap.py", "string.py", "dataclasses.py", "functools.py",
                "fractions.py", "shlex.py", "difflib.py")
VOCABULARY = 128  # ASCII; any other byte is read as '?'
CONTEXT = 32  # characters a sample sees


@dataclass(frozen=True)
class Corpus:
    """The text as byte codes (int64): the first 90 % to train on, the rest to validate."""

    train: torch.Tensor
    validation: torch.Tensor
    files: tuple[str, ...]

    def __repr__(self) -> str:
        return (f"Corpus({len(self.train):,} training and {len(self.validation):,} validation "
                f"characters from {len(self.files)} files of the standard library)")


def load_corpus(max_chars: int = 400_000) -> Corpus:
    """The standard library's source (:data:`CORPUS_FILES`) as one CPU tensor of byte codes."""
    max_chars = positive_int(max_chars, "max_chars", "load_corpus")
    folder = Path(sysconfig.get_paths()["stdlib"])
    text = b"\n".join((folder / name).read_bytes() for name in CORPUS_FILES)[:max_chars]
    codes = torch.frombuffer(bytearray(text), dtype=torch.uint8).long()
    codes[codes >= VOCABULARY] = ord("?")
    split = int(len(codes) * 0.9)
    return Corpus(codes[:split].clone(), codes[split:].clone(), CORPUS_FILES)


def count_model_losses(corpus: Corpus) -> tuple[float, float]:
    """The validation loss (nats per character) of two models made by counting the training
    text: letter frequencies alone, and each character given the one before (counts plus one
    half, so no pair is impossible). A target below the second needs more context than that."""
    def mean_loss(probabilities: torch.Tensor, index) -> float:
        return float(-probabilities[index].log().mean())

    train, held_out = corpus.train, corpus.validation
    letters = torch.bincount(train, minlength=VOCABULARY).double() + 0.5
    pairs = torch.zeros(VOCABULARY, VOCABULARY, dtype=torch.float64)
    pairs.index_put_((train[:-1], train[1:]), torch.ones(len(train) - 1, dtype=torch.float64),
                     accumulate=True)
    pairs += 0.5
    return (mean_loss(letters / letters.sum(), held_out),
            mean_loss(pairs / pairs.sum(dim=1, keepdim=True), (held_out[:-1], held_out[1:])))


class Block(nn.Module):
    """Pre-norm attention then an MLP, each added to the stream."""

    def __init__(self, width: int, heads: int, sdpa: bool):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width))

    def attend(self, q, k, v):
        if self.sdpa:  # lesson 08: one call, a fused kernel where the device has one
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        length = q.shape[-2]
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        causal = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()
        return scores.masked_fill(~causal, float("-inf")).softmax(dim=-1) @ v

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, length, 3, self.heads, -1).permute(
            2, 0, 3, 1, 4)
        attended = self.attend(q, k, v).transpose(1, 2).reshape(batch, length, width)
        x = x + self.proj(attended)
        return x + self.mlp(self.norm2(x))


class CharTransformer(nn.Module):
    """Predicts each next character of a window of :data:`CONTEXT` characters."""

    def __init__(self, width: int = 32, heads: int = 2, layers: int = 2, sdpa: bool = False):
        super().__init__()
        self.embed = nn.Embedding(VOCABULARY, width)
        self.position = nn.Parameter(torch.zeros(CONTEXT, width))
        self.blocks = nn.Sequential(*[Block(width, heads, sdpa) for _ in range(layers)])
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, VOCABULARY)

    def forward(self, codes):
        x = self.embed(codes) + self.position[:codes.shape[1]]
        return self.head(self.norm(self.blocks(x)))


@dataclass(frozen=True)
class Recipe:
    """One row of the table: the switches that are on, cumulatively."""

    name: str
    lesson: str  # the lesson that taught the change
    data_on_device: bool = False  # lesson 04: the corpus moved once, batches cut on the device
    read_every_step: bool = True  # lessons 01 and 08: loss.item() each step, for a log
    fused_optimizer: bool = False  # lesson 08: AdamW(fused=True), one update kernel
    batch_size: int = 16
    lr: float = 1e-2
    sdpa: bool = False  # lesson 08: F.scaled_dot_product_attention
    bf16: bool = False  # lesson 06: autocast to bfloat16
    compile_mode: str | None = None  # lesson 08: torch.compile's mode; None runs eagerly


@dataclass(frozen=True)
class Skipped:
    """A row this machine does not run, and why."""

    name: str
    lesson: str
    reason: str


def cumulative_changes(device=None, *, compile_on_cpu: bool = False) -> list[Recipe | Skipped]:
    """The table's rows, each adding one change to the row before (default :func:`get_device`).

    The larger batch is 4 times the baseline's with the learning rate doubled (Adam's
    square-root rule). ``torch.compile`` runs on accelerators where Inductor can build code, and
    on the CPU only with ``compile_on_cpu`` (its compile takes longer than the whole CPU table);
    CUDA graphs (``mode="reduce-overhead"``) only on CUDA.
    """
    device = resolve(device, "cumulative_changes")
    backend = backend_for(device)
    rows: list[Recipe | Skipped] = []
    current = Recipe("baseline: a newcomer's loop", "02")

    def add(name: str, lesson: str, **switches) -> None:
        nonlocal current
        current = replace(current, name=name, lesson=lesson, **switches)
        rows.append(current)

    rows.append(current)
    add("+ data on the device", "04", data_on_device=True)
    add("+ no read per step", "08", read_every_step=False)
    add("+ fused AdamW", "08", fused_optimizer=True)
    add("+ batch x4, lr x2", "05", batch_size=64, lr=2e-2)
    add("+ SDPA attention", "08", sdpa=True)
    if backend.native_bf16(device):
        add("+ bf16 autocast", "06", bf16=True)
    else:
        rows.append(Skipped("+ bf16 autocast", "06", f"{device} has no native bfloat16"))
    # Asked only where the row would run: importing Inductor to ask takes seconds.
    compiler = backend.compiler(device) if backend.accelerator or compile_on_cpu else None
    if compiler is None:
        rows.append(Skipped("+ torch.compile", "08", "on the CPU its compile takes longer than "
                                                     "the whole table (compile_on_cpu=True runs "
                                                     "it)"))
    elif not compiler.ready:
        rows.append(Skipped("+ torch.compile", "08", compiler.reason))
    else:
        add("+ torch.compile", "08", compile_mode="default")
    if device.type == "cuda" and current.compile_mode:
        add("+ CUDA graphs", "08", compile_mode="reduce-overhead")
    else:
        rows.append(Skipped("+ CUDA graphs", "08", "CUDA graphs need a CUDA GPU and the "
                                                   "compiled row"))
    return rows


@dataclass(frozen=True)
class RunRecord:
    """One run of one row to the target (plain numbers, ready for a table)."""

    recipe: str
    lesson: str
    seed: int
    seconds: float  # from the first step to the evaluation that met the target
    steps: int
    tokens_per_s: float  # training tokens per second, evaluations included
    peak_bytes: int | None  # the allocator's peak on an accelerator; None on the CPU
    reached: bool  # False: max_steps ran out first
    validation_loss: float  # at the last evaluation


def _validation_batch(corpus: Corpus, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """32 fixed windows of the validation text, the same for every row and run."""
    starts = torch.linspace(0, len(corpus.validation) - CONTEXT - 2, 32).long()
    windows = corpus.validation[starts[:, None] + torch.arange(CONTEXT + 1)].to(device)
    return windows[:, :-1], windows[:, 1:]


def train_to_target(recipe: Recipe, corpus: Corpus, *, target: float, seed: int, device=None,
                    eval_every: int = 5, max_steps: int = 3000) -> RunRecord:
    """Train a fresh :class:`CharTransformer` (seeded) under ``recipe`` until the validation loss
    is at most ``target`` nats per character, read once every ``eval_every`` steps."""
    device = resolve(device, "train_to_target")
    target = positive_number(target, "target", "train_to_target")
    eval_every = positive_int(eval_every, "eval_every", "train_to_target")
    max_steps = positive_int(max_steps, "max_steps", "train_to_target")
    torch.manual_seed(seed)
    model = CharTransformer(sdpa=recipe.sdpa).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr,
                                  fused=True if recipe.fused_optimizer else None)
    forward = torch.compile(model, mode=recipe.compile_mode) if recipe.compile_mode else model
    text = corpus.train.to(device) if recipe.data_on_device else corpus.train
    sampler = torch.Generator(device=text.device).manual_seed(seed)
    offsets = torch.arange(CONTEXT + 1, device=text.device)
    check_x, check_y = _validation_batch(corpus, device)
    backend = backend_for(device)
    backend.reset_peak(device)
    synchronize(device)
    started = time.perf_counter()
    step, validation, reached = 0, float("inf"), False
    while step < max_steps and not reached:
        step += 1
        starts = torch.randint(len(text) - CONTEXT - 1, (recipe.batch_size,), device=text.device,
                               generator=sampler)
        windows = text[starts[:, None] + offsets].to(device)  # a copy per batch unless on device
        with torch.autocast(device.type, torch.bfloat16, enabled=recipe.bf16):
            logits = forward(windows[:, :-1])
        loss = F.cross_entropy(logits.float().flatten(0, 1), windows[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if recipe.read_every_step:
            loss.item()  # the newcomer's log line: the host waits for the device every step
        if step % eval_every == 0:
            with torch.no_grad(), torch.autocast(device.type, torch.bfloat16,
                                                 enabled=recipe.bf16):
                checked = F.cross_entropy(forward(check_x).float().flatten(0, 1),
                                          check_y.flatten())
            validation = checked.item()  # one read per evaluation: when to stop
            reached = validation <= target
    synchronize(device)
    seconds = time.perf_counter() - started
    reading = backend.memory(device)
    return RunRecord(recipe.name, recipe.lesson, seed, seconds, step,
                     step * recipe.batch_size * CONTEXT / seconds,
                     reading.peak_allocated if reading else None, reached, validation)


def measure(recipes: list[Recipe], corpus: Corpus, *, target: float, repeats: int = 5,
            device=None, eval_every: int = 5, max_steps: int = 3000, threads: int | None = None,
            progress=None) -> dict[str, list[RunRecord]]:
    """``repeats`` runs of each recipe (seeds 0, 1, ...), name -> its records.

    Each recipe first runs a few steps unrecorded (a warm-up: the allocator's cache, threads,
    compilation). The runs are interleaved (seed 0 of every row, then seed 1, ...), so that a
    change in the machine's load spreads over every row instead of landing on one.
    ``threads`` sets PyTorch's CPU threads for the runs (None leaves them): on a small or shared
    CPU, one thread avoids threads waiting for each other at every operator of this small model.
    ``progress(record)``, if given, is called after each run.
    """
    device = resolve(device, "measure")
    repeats = positive_int(repeats, "repeats", "measure")
    threads = positive_int(threads, "threads", "measure", none_means="leave them as they are")
    before = torch.get_num_threads()
    torch.set_num_threads(threads or before)
    try:
        return _interleaved(recipes, corpus, target, repeats, device, eval_every, max_steps,
                            progress)
    finally:
        torch.set_num_threads(before)


def _interleaved(recipes, corpus, target, repeats, device, eval_every, max_steps, progress):
    for recipe in recipes:
        train_to_target(recipe, corpus, target=1e-9, seed=10_000, device=device,
                        eval_every=max(1, min(eval_every, 3)), max_steps=3)
    records: dict[str, list[RunRecord]] = {recipe.name: [] for recipe in recipes}
    for seed in range(repeats):
        for recipe in recipes:
            record = train_to_target(recipe, corpus, target=target, seed=seed, device=device,
                                     eval_every=eval_every, max_steps=max_steps)
            records[recipe.name].append(record)
            if progress is not None:
                progress(record)
    return records
