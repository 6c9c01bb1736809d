"""Run a check on variants and right alternatives, each in a forked child with a time limit.

A child runs the check in-process (the visible inputs, then the hidden ones for each seed),
as tests/probe_roundtrip.py does, and sends back each run's share of the points and message.
A variant that loops forever is killed when its time is up.
"""
from __future__ import annotations

import contextlib
import importlib
import json
import multiprocessing
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .exercises import Exercise
from .variants import Variant

HIDDEN_SEEDS = (1, 7, 42)


@dataclass(frozen=True)
class Settings:
    """How one exercise is run; an exercise not in SETTINGS gets the defaults."""

    hidden_seeds: tuple[int, ...] = HIDDEN_SEEDS
    timeout_s: float = 20.0  # a check takes about a second here; a variant may loop
    slow: bool = False  # left out unless asked for (--slow): say why in `why`
    why: str = ""


SETTINGS = {
    "lesson07/accumulation_step": Settings(
        hidden_seeds=(1, 7),
        why="each run builds a two-rank process group in-process (about 2 s): two hidden seeds"),
    "lesson07/ddp_script": Settings(
        hidden_seeds=(), timeout_s=400.0, slow=True,
        why="each run launches torchrun with two CPU ranks (about 10 s of CPU each): run "
            "with --slow, visible inputs only"),
    "lesson10/train_until": Settings(
        hidden_seeds=(1, 7),
        why="each run trains two small models per case, drawn and checked: two hidden seeds"),
}


def settings(exercise: Exercise) -> Settings:
    return SETTINGS.get(exercise.key, Settings())


@dataclass(frozen=True)
class Run:
    hidden: bool
    seed: int
    fraction: float
    message: str


def check_runs(exercise: Exercise, answers: tuple, seeds: tuple[int, ...]) -> list[Run]:
    from course_utils.checks import REGISTRY
    from course_utils.checks.framework import run_probe

    check = REGISTRY[exercise.check]
    runs = []
    for hidden, seed in [(False, 0), *((True, seed) for seed in seeds)]:
        inputs = json.loads(json.dumps(check.make_inputs(seed, hidden)))
        verdict = check.evaluate(inputs, run_probe(check.probe, answers, inputs), hidden)
        runs.append(Run(hidden, seed, verdict.fraction, verdict.message))
    return runs


def alternative_answers(exercise: Exercise, index: int, folder: Path) -> tuple:
    """The index-th right alternative of the exercise (alternatives/lessonNN_<id>.py)."""
    module = importlib.import_module(f"{__package__}.alternatives.{module_name(exercise)}")
    answer = module.ALTERNATIVES[index]
    if exercise.script:
        return exercise.answers(answer, folder)
    return answer if isinstance(answer, tuple) else (answer,)


def module_name(exercise: Exercise) -> str:
    return exercise.key.replace("/", "_")


def _child(connection, exercise: Exercise, what: str | int, seeds) -> None:
    with tempfile.TemporaryDirectory(prefix="mutant-") as folder, \
            open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet), \
            contextlib.redirect_stderr(quiet):
        try:
            answers = alternative_answers(exercise, what, Path(folder)) if isinstance(
                what, int) else exercise.answers(what, Path(folder))
        except Exception as error:  # noqa: BLE001 - the variant's cell itself does not run
            connection.send({"stillborn": f"{type(error).__name__}: {error}"})
            return
        runs = check_runs(exercise, answers, seeds)
        connection.send({"runs": [run.__dict__ for run in runs]})


def run_one(exercise: Exercise, what: str | int, seeds: tuple[int, ...],
            timeout_s: float) -> dict:
    """{"runs": [...]} | {"stillborn": why} | {"timeout": seconds}; ``what`` is a variant's
    source or an alternative's index."""
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(send, exercise, what, seeds), daemon=True)
    child.start()
    send.close()
    try:
        result = receive.recv() if receive.poll(timeout_s) else {"timeout": timeout_s}
    except EOFError:
        result = {"stillborn": f"the check's process died (exit {child.exitcode})"}
    if child.is_alive():
        child.kill()
    child.join()
    receive.close()
    return result


# ---------------------------------------------------------------- classification

def _normal(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def mentions(text: str, keyword: str) -> bool:
    """Whether text names keyword: short words whole ('cpu', 'dim'), long ones by their stem
    ('synchronize' matches 'synchronises'), ignoring case and punctuation ('zero_grad()')."""
    word = _normal(keyword)
    if not word:
        return False
    if len(word) <= 4:  # whole, or nearly: 'cpu', 'dim', a dict's key 'a'
        if len(word) < 3:
            return re.search(rf"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])", text.lower()) \
                is not None
        return re.search(rf"(?<![a-z0-9]){re.escape(keyword.lower())}", text.lower()) is not None
    stem = word if len(word) <= 6 else word[:max(6, len(word) - 3)]
    return stem in _normal(text)


def causes(message: str) -> str:
    """The message without its fixes ("How to fix it: ..." lines): what it says went wrong."""
    return "\n".join(line for line in message.splitlines()
                     if not line.startswith("How to fix it"))


def first_sentence(message: str) -> str:
    line = message.strip().splitlines()[0] if message.strip() else ""
    return re.split(r"(?<=[.!?])\s+(?=[A-Z(])", line, maxsplit=1)[0]


def classify(variant: Variant, result: dict, equivalents: dict[str, str]) -> tuple[str, str]:
    """(verdict, message): named, generic (failed without naming it), survivor, equivalent,
    stillborn (the variant's cell does not run)."""
    if "stillborn" in result:
        return "stillborn", result["stillborn"]
    if "timeout" in result:
        return "generic", f"(no verdict within {result['timeout']:.0f} s)"
    failing = [run for run in result["runs"] if run["fraction"] < 1]
    if not failing:
        return ("equivalent" if variant.id in equivalents else "survivor"), ""
    message = failing[0]["message"]
    text = first_sentence(message) if variant.kind == "learner" else causes(message)
    named = any(mentions(text, keyword) for keyword in variant.keywords)
    return ("named" if named else "generic"), message
