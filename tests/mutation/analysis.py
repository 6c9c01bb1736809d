"""One exercise's mutation analysis: its variants and right alternatives, run and classified."""
from __future__ import annotations

import importlib
import json
import time
from pathlib import Path

from .exercises import Exercise
from .run import classify, module_name, run_one, settings
from .variants import Variant, variants

HERE = Path(__file__).resolve().parent
EQUIVALENTS = HERE / "equivalents.json"
VERDICTS = ("named", "generic", "survivor", "equivalent", "stillborn")


def equivalents() -> dict[str, str]:
    """variant id → why it behaves as the model answer does (tests/mutation/equivalents.json)."""
    return json.loads(EQUIVALENTS.read_text())


def alternatives(exercise: Exercise) -> list:
    try:
        module = importlib.import_module(f"{__package__}.alternatives.{module_name(exercise)}")
    except ModuleNotFoundError:
        return []
    return list(module.ALTERNATIVES)


def alternative_name(answer) -> str:
    if isinstance(answer, str):
        return answer.strip().splitlines()[0][:60] if answer.strip() else "(empty)"
    parts = answer if isinstance(answer, tuple) else (answer,)
    return " + ".join(getattr(part, "__name__", type(part).__name__) for part in parts)


def figures(rows: list[dict]) -> dict:
    """Counts per verdict and the shares the goals are stated in, for one class of variants."""
    counts = {verdict: sum(row["verdict"] == verdict for row in rows) for verdict in VERDICTS}
    judged = counts["named"] + counts["generic"] + counts["survivor"]
    return {"variants": len(rows), **counts,
            "killed": round((counts["named"] + counts["generic"]) / judged, 4) if judged else 1.0,
            "named_share": round(counts["named"] / judged, 4) if judged else 1.0}


def warm_up(exercise: Exercise, seeds: tuple[int, ...]) -> str:
    """Run the check on the model answer here, before any child forks: its imports (torch,
    the probe's helpers) are then loaded once. Returns the message if it loses points."""
    import torch

    from .run import check_runs
    from .variants import original

    torch.set_num_threads(1)  # a child forked after a parallel region would wait forever
    if exercise.script:
        return ""  # a script's check launches processes: nothing to load here
    runs = check_runs(exercise, exercise.answers(original(exercise)), seeds[:1])
    return next((run.message for run in runs if run.fraction < 1), "")


def analyse(exercise: Exercise, seeds: tuple[int, ...] | None = None,
            only: list[Variant] | None = None, progress=None, note: str = "") -> dict:
    """Run every variant (or ``only``) and every right alternative; the exercise's record."""
    setting = settings(exercise)
    seeds = setting.hidden_seeds if seeds is None else seeds
    known, started, rows = equivalents(), time.perf_counter(), []
    model = warm_up(exercise, seeds)
    if model:
        raise RuntimeError(f"{exercise.key}: the model answer itself loses points: {model}")
    for variant in variants(exercise) if only is None else only:
        result = run_one(exercise, variant.source, seeds, setting.timeout_s)
        verdict, message = classify(variant, result, known)
        rows.append({"id": variant.id, "kind": variant.kind, "operator": variant.operator,
                     "detail": variant.detail, "verdict": verdict, "message": message})
        if progress:
            progress(exercise, rows[-1])
    lost = []
    for index, answer in enumerate(alternatives(exercise)):
        result = run_one(exercise, index, seeds, setting.timeout_s)
        runs = result.get("runs", [])
        short = [run for run in runs if run["fraction"] < 1]
        if short or not runs:
            lost.append({"alternative": alternative_name(answer), "message": (
                short[0]["message"] if short else json.dumps(result))})
    return {
        "exercise": exercise.key, "hidden_seeds": list(seeds), "note": note,
        "seconds": round(time.perf_counter() - started, 1),
        "generic": figures([row for row in rows if row["kind"] == "generic"]),
        "learner": figures([row for row in rows if row["kind"] == "learner"]),
        "alternatives": len(alternatives(exercise)), "alternatives_lost": lost,
        "survivors": sorted(row["id"] for row in rows if row["verdict"] == "survivor"),
        "rows": rows,
    }
