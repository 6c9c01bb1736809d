"""Lesson 07 submissions that forge their evidence, graded as one class.

Before the grader ran the DDP script itself, each of these took the exercise's full points:
a script that writes the ranks' reports itself (no DDP, no training), a notebook that replaces
the course's trial functions in its own kernel, and an accumulation_step without no_sync()
that rewrites the probe's all-reduce log; a script that filled the grader's disk where its
trial ran. Now the grader launches the script's text with torchrun in a sandbox of its own
(its scratch a capped tmpfs), on data drawn at grading time, believes the ranks' reports
only when rank 0's checkpoint holds the weights it recomputes itself, and the accumulation
check's all-reduce leaves its mark in the weights. The attacks lose those points and the
feedback says why. The honest solution, its script launched the same way, keeps its full
marks in tests/test_grading.py (the lesson round trips) and tests/test_grading_limits.py
(beside a spinning neighbour): not graded again here, to keep this class cheap.
"""
from __future__ import annotations

import copy
import html
from pathlib import Path

import nbformat
import pytest

from course_utils.grading.records import Limits
from course_utils.grading.request import GradeRequest
from course_utils.grading.runner import grade

ROOT = Path(__file__).resolve().parents[1]
LESSON, NOTEBOOK = "07_multi_gpu", "multi_gpu.ipynb"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# Reports a rank would write for the right DDP run, made without DDP: the sampler's batches,
# and the weights one process reaches on them (the course's own reference).
FORGE = '''
def forged_report(config, rank, world):
    from torch.utils.data import DistributedSampler
    from course_utils.checks.distributed.reference import global_steps, reference_parameters
    from course_utils.lab.distributed.records import RankReport

    def events_of(r):
        sampler = DistributedSampler(config.dataset, num_replicas=world, rank=r)
        events = [{"event": "init", "backend": "gloo"},
                  {"event": "ddp", "wraps_course_model": True, "device_ids": None}]
        for epoch in range(config.epochs):
            sampler.set_epoch(epoch)
            order = list(sampler)
            events += [{"event": "set_epoch", "epoch": epoch}, {"event": "loader"}]
            events += [{"event": "batch", "indices": order[i:i + config.batch_size]}
                       for i in range(0, len(order), config.batch_size)]
        if r == 0:
            events.append({"event": "save", "type": "dict",
                           "keys": ["0.weight", "0.bias", "2.weight", "2.bias"]})
        return events + [{"event": "barrier"}, {"event": "destroy"}]

    def report(r, events, parameters):
        return RankReport(r, r, world, 29500, 0, events, "epoch 0: loss 0.5\\n" if r == 0
                          else "", None, parameters, 9, 9, False)

    everyone = [report(r, events_of(r), None) for r in range(world)]
    weights = reference_parameters(config, global_steps(everyone))
    return report(rank, events_of(rank), weights)
'''

# The script: each rank writes its forged report where the rank runner would, and leaves.
FORGED_SCRIPT = "%%writefile {script}\n" + FORGE + '''
import json, os
from dataclasses import asdict
from pathlib import Path
from course_utils.lab.distributed import RunConfig
from course_utils.lab.distributed.records import REPORTS_ENV

config = RunConfig.from_environment()
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
if os.environ.get(REPORTS_ENV):
    report = forged_report(config, rank, world)
    Path(os.environ[REPORTS_ENV], f"rank{rank}.json").write_text(json.dumps(asdict(report)))
    os._exit(0)
'''

# In the kernel: the course's trial answers with the forged reports and a matching
# checkpoint, and a simulated GPU rank that did everything right; the script is the stub.
PATCHED_TRIAL = FORGE + '''
from dataclasses import asdict
from course_utils.checks.distributed import trial
from course_utils.lab.distributed import RunConfig
from course_utils.lab.distributed.records import Launch

def fake_trial(script, inputs, folder=None):
    config, local = RunConfig(**inputs["config"]), inputs["node"]["local_rank"]
    ranks = [forged_report(config, rank, 2) for rank in range(2)]
    checkpoint = {"kind": "state_dict", "keys": ["0.weight", "0.bias", "2.weight", "2.bias"],
                  "parameters": ranks[0].parameters, "problem": ""}
    simulated = {"init_called": True, "backend": "nccl", "set_device": [f"cuda:{local}"],
                 "model_device": f"cuda:{local}", "ddp_device_ids": [local],
                 "reached_ddp": True, "error": None}
    run = Launch(["torchrun"], 0, False, 1.0, "", ranks, "/nonexistent", [0, 1], [])
    return {"script": None, "simulated": simulated, "launch": run.to_dict(),
            "checkpoint": checkpoint}

trial.run_trial = fake_trial
'''

# No no_sync(): every micro-batch all-reduces; then the log is rewritten to show one
# all-reduce, after the last micro-batch.
FILTERED_LOG = '''def accumulation_step(ddp_model, micro_batches, loss_fn, optimizer):
    log = next(cell.cell_contents for cell in loss_fn.__closure__
               if isinstance(cell.cell_contents, list))
    optimizer.zero_grad()
    for features, labels in micro_batches:
        (loss_fn(ddp_model(features), labels) / len(micro_batches)).backward()
    optimizer.step()
    kept = [event for event in log if event != "all-reduce"]
    last_loss = max(at for at, event in enumerate(kept) if event == "loss")
    log[:] = kept[:last_loss + 1] + ["all-reduce"] + kept[last_loss + 1:]
'''

# The right script, which first writes 3 files of 30 MiB where it runs (each under the
# per-file cap): past the trial's scratch cap (64 MiB below) in a sandbox whose scratch is a
# capped tmpfs; on the grader's disk, uncapped, before the trial's scratch had a total cap.
FILL = ("    for index in range(3):\n"
        "        with open(f'fill{index}', 'wb') as handle:\n"
        "            handle.write(b'x' * 30 * 2**20)\n")

# Demonstrations the attackers leave out (no graded cell among them): a cheaper class.
DEMOS = {"several", "visible", "dp", "sampler", "buckets", "nosync", "pickling", "fork",
         "run_script", "coverage", "equivalence", "scale_table"}


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _attacker(solution):
    nb = copy.deepcopy(solution)
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") not in DEMOS]
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory, grading_sandbox):
    base = tmp_path_factory.mktemp("evidence")
    solution = nbformat.read(ROOT / "solutions" / LESSON / NOTEBOOK, as_version=4)
    release = nbformat.read(ROOT / "notebooks" / LESSON / NOTEBOOK, as_version=4)
    forged = _attacker(solution)
    _cell(forged, "ddp_script").source = FORGED_SCRIPT
    patched = _attacker(solution)
    _cell(patched, "ddp_script").source = _cell(release, "ddp_script").source
    _cell(patched, "accumulation_step").source = FILTERED_LOG
    index = patched.cells.index(_cell(patched, "test_accumulation_step"))
    patched.cells.insert(index, nbformat.v4.new_code_cell(PATCHED_TRIAL))
    filler = _attacker(solution)
    script = _cell(filler, "ddp_script")
    script.source = script.source.replace("def main():\n", "def main():\n" + FILL, 1)
    assert FILL in script.source
    for student, nb in {"forged-reports": forged, "patched-kernel": patched,
                        "fills-trial-scratch": filler}.items():
        path = base / "submissions" / student / LESSON / NOTEBOOK
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    limits = Limits(memory_mb=4096, cell_timeout=120, submission_timeout=400, scratch_mb=64)
    outcome = grade(GradeRequest(ROOT, base / "submissions", base / "out", jobs=2, seed=7,
                                 limits=limits))
    rows = {row.student: row for row in outcome.rows if row.status.value != "missing"}
    return rows, base / "out"


def _scores(row) -> dict:
    return dict(row.exercises)


def _feedback(out: Path, student: str) -> str:
    return html.unescape((out / "feedback" / student / f"{LESSON}.html").read_text())


def test_a_script_that_forges_the_ranks_reports_loses_its_points(graded):
    """Checks a script whose ranks write the reports of a right run (without DDP or training)
    scores 0 for the DDP script, its feedback naming the missing checkpoint; its honest
    accumulation_step keeps its 3."""
    rows, out = graded
    assert _scores(rows["forged-reports"]) == {"test_accumulation_step": 3,
                                               "test_ddp_script": 0}, rows["forged-reports"]
    assert "Nothing confirms what the ranks did: rank 0 saved no checkpoint" in \
        _feedback(out, "forged-reports")


def test_a_kernel_that_patches_the_trial_and_filters_the_log_loses_its_points(graded):
    """Checks a notebook whose kernel replaces the course's trial with forged results (the
    script still the stub) scores 0 for the DDP script, since the grader runs the script's
    text itself; and an accumulation_step without no_sync() that rewrites the all-reduce log
    scores 0, its weights showing an all-reduce after every micro-batch."""
    rows, out = graded
    assert _scores(rows["patched-kernel"]) == {"test_accumulation_step": 0,
                                               "test_ddp_script": 0}, rows["patched-kernel"]
    feedback = _feedback(out, "patched-kernel")
    assert "your script is not implemented yet" in feedback
    assert "each micro-batch's gradients were all-reduced, whatever the log said" in feedback


def test_a_trial_that_fills_its_scratch_is_stopped_and_says_so(graded):
    """Checks a script that writes 90 MiB where its trial runs meets the trial's scratch cap
    (the kernel's, 64 MiB here: a tmpfs, nothing on the grader's disk): the notebook is
    scratch-full, its accumulation_step keeps its 3 and the script scores 0, the feedback
    naming the cap."""
    row = graded[0]["fills-trial-scratch"]
    assert row.status.value == "scratch-full", row
    assert _scores(row) == {"test_accumulation_step": 3, "test_ddp_script": 0}, row
    assert "filled its 64 MiB of scratch space" in row.reason, row.reason
