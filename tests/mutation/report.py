"""The record of the last runs (baseline.json) and the report written from it (docs/mutation.md).

The baseline is the ratchet: tests/test_mutation.py fails when an exercise's shares fall below
it, or a variant survives that is neither among its survivors nor listed as equivalent.
"""
from __future__ import annotations

import json

from .analysis import HERE, equivalents
from .exercises import ROOT, exercises
from .run import HIDDEN_SEEDS, settings
from .variants import OPERATORS

BASELINE = HERE / "baseline.json"
REPORT = ROOT / "docs" / "mutation.md"
GOALS = {"generic_killed": 1.0, "generic_named": 0.95, "learner_named": 0.90}


def load_baseline() -> dict:
    return json.loads(BASELINE.read_text()) if BASELINE.exists() else {"exercises": {}}


def slim(record: dict) -> dict:
    """The record as kept: messages cut to their first line, none for named variants."""
    rows = [{**row, "message": "" if row["verdict"] == "named" else
             (row["message"].strip().splitlines() or [""])[0][:200]} for row in record["rows"]]
    return {**record, "rows": rows}


def save(records: list[dict], run_note: str) -> dict:
    baseline = load_baseline()
    for record in records:
        baseline["exercises"][record["exercise"]] = slim(record)
    order = [exercise.key for exercise in exercises()]
    baseline["exercises"] = {key: baseline["exercises"][key] for key in order
                             if key in baseline["exercises"]}
    keys = {record["exercise"] for record in records}
    partial = {k: v for k, v in baseline.get("partial_runs", {}).items()
               if not set(k.split(", ")) <= keys}  # notes of runs this one repeats go
    if keys >= {e.key for e in exercises() if not settings(e).slow}:
        baseline["run"] = run_note
        if keys == {e.key for e in exercises()}:
            baseline["run_with_slow"] = run_note
    else:
        partial[", ".join(sorted(keys))] = run_note
    baseline["partial_runs"] = partial
    BASELINE.write_text(json.dumps(baseline, indent=1, ensure_ascii=False) + "\n")
    REPORT.write_text(markdown(baseline))
    return baseline


def _share(value: float) -> str:
    return f"{100 * value:.0f} %"


def _judged(figures: dict, share: str) -> str:
    """A share, or – when no variant of the class was judged."""
    judged = figures["named"] + figures["generic"] + figures["survivor"]
    return _share(figures[share]) if judged else "–"


def _row(key: str, record: dict) -> str:
    g, learner = record["generic"], record["learner"]
    lost = len(record["alternatives_lost"])
    notes = [record["note"]] if record.get("note") else []
    if tuple(record["hidden_seeds"]) != HIDDEN_SEEDS:
        notes.append(f"hidden seeds {record['hidden_seeds']}" if record["hidden_seeds"] else
                     "visible inputs only")
    note = f" ({'; '.join(notes)})" if notes else ""
    return (f"| {key}{note} | {g['variants']} | {g['equivalent']} | {_judged(g, 'killed')} | "
            f"{_judged(g, 'named_share')} | {learner['variants']} | {learner['equivalent']} | "
            f"{_judged(learner, 'killed')} | {_judged(learner, 'named_share')} | "
            f"{record['alternatives'] - lost}/{record['alternatives']} | "
            f"{record['seconds']:.0f} |")


def _totals(records: list[dict], kind: str) -> dict:
    total = {key: sum(r[kind][key] for r in records) for key in (
        "variants", "named", "generic", "survivor", "equivalent", "stillborn")}
    judged = total["named"] + total["generic"] + total["survivor"]
    total["killed"] = (total["named"] + total["generic"]) / judged if judged else 1.0
    total["named_share"] = total["named"] / judged if judged else 1.0
    return total


def _details(key: str, record: dict) -> list[str]:
    lines = [f"### {key}", ""]
    for verdict, title in (("survivor", "Survivors (pass every run)"),
                           ("generic", "Failed without naming the change")):
        rows = [row for row in record["rows"] if row["verdict"] == verdict]
        if rows:
            lines += [f"{title}:", ""]
            lines += [f"- `{row['id']}` ({row['kind']}) {row['detail']}" + (
                f" — “{row['message'][:140]}”" if row["message"] else "") for row in rows]
            lines.append("")
    for lost in record["alternatives_lost"]:
        lines += [(f"- right alternative `{lost['alternative']}` lost points: "
                  f"“{lost['message'][:160]}”"), ""]
    return lines if len(lines) > 2 else []


def markdown(baseline: dict) -> str:
    records = baseline["exercises"]
    generic = _totals(list(records.values()), "generic")
    learner = _totals(list(records.values()), "learner")
    skipped = [f"`{e.key}` ({settings(e).why})" for e in exercises() if e.key not in records]
    lines = [
        "# Mutation analysis of the checks",
        "",
        ("Written by `make mutation` (`python -m tests.mutation --write`, tests/mutation/); do "
        "not edit by hand. Each exercise's model answer is changed one construct at a time: "
        "*generic* variants (delete a statement, swap an operator, shift a constant or a "
        "bound, drop a call or an argument, negate a condition) and *learner* variants, each "
        "modelling a mistake people make in device code (tests/mutation/learner.py names "
        "them). Every variant and every right alternative (tests/mutation/alternatives/) is "
        "checked in-process on the visible inputs and on hidden inputs for several seeds."),
        "",
        ("**What the figures mean.** *killed*: the share of non-equivalent variants the check "
        "fails on at least one of those runs. *named*: the share it fails with a message that "
        "names the change — for a generic variant, a name from the changed statement or the "
        "operator's construct in what the message says went wrong (its 'How to fix it' lines "
        "left out); for a learner variant, a word of the "
        "modelled mistake in the message's first sentence (the first failed run's message). "
        "A variant that passes every run is a *survivor*, unless "
        "tests/mutation/equivalents.json lists it with the reason it behaves as the model "
        "answer does. *right*: right alternatives that keep full marks on every run. "
        "The matching of words is a heuristic: read the listed messages, not only the shares. "
        "The verdicts are the in-process ones; `make test-mutation-grade` grades a sample (2 "
        "killed variants and a right answer for each of 7 fast exercises) through `course "
        "grade` in the sandbox with the same seeds and fails unless every graded cell's "
        "points agree."),
        "",
        (f"**Goals** (issue 27): every non-equivalent generic variant fails "
        f"({_share(GOALS['generic_killed'])}), {_share(GOALS['generic_named'])} of them with "
        f"the change named; {_share(GOALS['learner_named'])} of learner variants fail with the "
        "mistake named in the first sentence; no right alternative loses points. "
        f"**Today**: generic {_share(generic['killed'])} killed, "
        f"{_share(generic['named_share'])} named; learner {_share(learner['killed'])} killed, "
        f"{_share(learner['named_share'])} named; {generic['survivor'] + learner['survivor']} "
        "survivors. The gap is the ratchet's: tests/test_mutation.py fails when a figure "
        "drops below tests/mutation/baseline.json or a new survivor appears."),
        "",
        f"**The full run**: {baseline.get('run', '')}",
        "",
        *([f"**The last run with the slow exercises**: {baseline['run_with_slow']}", ""]
          if "run_with_slow" in baseline else []),
        *(f"**Run apart**, {keys}: {note}\n" for keys, note in baseline.get(
            "partial_runs", {}).items()),
    ]
    if skipped:
        lines += ["**Not run**: " + "; ".join(skipped) + ".", ""]
    slow = [f"`{e.key}` ({settings(e).why})" for e in exercises() if settings(e).slow]
    if slow:
        lines += ["`make mutation` leaves out the exercises marked slow unless "
                  "`MUTATION_FLAGS=--slow`, and keeps their last record: " + "; ".join(slow)
                  + ".", ""]
    lines += [
        ("| exercise | generic | equiv. | killed | named | learner | equiv. | killed | named "
        "| right | s |"),
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *(_row(key, record) for key, record in records.items()),
        "",
        "## Survivors and unnamed failures",
        "",
    ]
    for key, record in records.items():
        lines += _details(key, record)
    lines += ["## Operators", "", "| operator | class | the mistake it models |", "|---|---|---|",
              *(f"| {op.name} | {op.kind} | {op.mistake} |" for op in OPERATORS), ""]
    listed = equivalents()
    lines += ["## Equivalent variants", "",
              *(f"- `{vid}`: {why}" for vid, why in sorted(listed.items())), ""]
    return "\n".join(lines)


def regressions(record: dict, baseline: dict) -> list[str]:
    """What got worse than the recorded baseline: a share, a new survivor, a lost alternative."""
    known = baseline["exercises"].get(record["exercise"])
    if known is None:  # a new exercise: its first run becomes its baseline
        return []
    found = []
    for kind in ("generic", "learner"):
        for share in ("killed", "named_share"):
            if record[kind][share] < known[kind][share] - 1e-9:
                found.append(f"{record['exercise']}: {kind} {share} fell from "
                             f"{known[kind][share]:.0%} to {record[kind][share]:.0%}")
    for vid in sorted(set(record["survivors"]) - set(known["survivors"])):
        row = next(row for row in record["rows"] if row["id"] == vid)
        found.append(f"new survivor {vid}: {row['detail']} (make the check fail on it, or "
                     "list it in tests/mutation/equivalents.json with the reason)")
    lost = {item["alternative"] for item in known["alternatives_lost"]}
    found += [f"{record['exercise']}: right alternative {item['alternative']} lost points: "
              f"{item['message']}" for item in record["alternatives_lost"]
              if item["alternative"] not in lost]
    return found
