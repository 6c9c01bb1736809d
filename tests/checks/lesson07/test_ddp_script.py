"""Tests of the check course_utils/checks/lesson07/ddp_script.py."""
from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import nbformat
import pytest
import torch

from course_utils import checks
from course_utils.checks import distributed as check_ddp
from course_utils.checks.distributed import patient
from course_utils.checks.lesson07 import ddp_script as ddp_check
from course_utils.lab.distributed import RankReport, epoch_coverage

from ...conftest import ROOT
from ...probe_roundtrip import HIDDEN_SEEDS, failure, graded, passes
from .shared import LESSON

# ================================================================ ddp_script

def solution_script() -> str:
    """The model answer: the solution cell without its %%writefile line and markers."""
    nb = nbformat.read(ROOT / "solutions" / LESSON / "multi_gpu.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id")
                == "ddp_script")
    first, *lines = cell.source.splitlines()
    assert first == "%%writefile {script}"
    markers = ("### BEGIN SOLUTION", "### END SOLUTION")
    return "\n".join(line for line in lines if line.strip() not in markers) + "\n"


SOLUTION = solution_script()


def changed(*edits: tuple[str, str]) -> str:
    """The solution with each (old, new) edit made; every old text must be there."""
    text = SOLUTION
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return text


SET_EPOCH = ("        sampler.set_epoch(epoch)\n", "")
NO_SAMPLER = ("batch_size=config.batch_size, sampler=sampler)",
              "batch_size=config.batch_size, shuffle=True)")
EVERY_RANK_SAVES = ("    if rank == 0:\n        torch.save(", "    if True:\n        torch.save(")
NO_DESTROY = ("    dist.destroy_process_group()\n", "")
NCCL = ('        backend = "gloo"', '        backend = "nccl"')
HANGS = ('            print(f"epoch {epoch}: loss {loss.item():.4f}")\n',
         ('            print(f"epoch {epoch}: loss {loss.item():.4f}")\n'
         '            dist.barrier()  # only rank 0 gets here: rank 1 never joins\n'))
EVERY_RANK_PRINTS = ('        if rank == 0:\n            print(',
                     '        if True:\n            print(')
WRAPPER_STATE = ("torch.save(ddp_model.module.state_dict()", "torch.save(ddp_model.state_dict()")
NO_DDP = ('    ddp_model = DDP(model, device_ids=[local_rank] if device.type == "cuda" else None)',
          "    ddp_model = model")
SAVE_MODEL = ("torch.save(ddp_model.module.state_dict()", "torch.save(model.state_dict()")
WHOLE_MODULE = ("torch.save(ddp_model.module.state_dict()", "torch.save(ddp_model.module")
PLAIN_FORWARD = ("loss = F.cross_entropy(ddp_model(features), labels)",
                 "loss = F.cross_entropy(model(features), labels)")
DEVICE_IDS_ON_CPU = ('device_ids=[local_rank] if device.type == "cuda" else None',
                     "device_ids=[local_rank]")
GLOBAL_RANK = ('device = torch.device("cuda", local_rank)',
               'device = torch.device("cuda", int(os.environ["RANK"]))')
ALWAYS_GLOO = ('        backend = "nccl"', '        backend = "gloo"')
GPU_ZERO = ('device = torch.device("cuda", local_rank)\n        torch.cuda.set_device(device)',
            'device = torch.device("cuda")')
RIGHT_ALTERNATIVE = changed(  # torch picks the backend; device_id; save the inner model
    ('    dist.init_process_group(backend, device_id=device if device.type == "cuda" else None)',
     '    dist.init_process_group(device_id=device if device.type == "cuda" else None)'),
    ("torch.save(ddp_model.module.state_dict()", "torch.save(model.state_dict()"),
    ('device_ids=[local_rank] if device.type == "cuda" else None',
     'device_ids=[device] if device.type == "cuda" else None'))


class Launches:
    """launch_patiently(), memoised on the script's text and the run's settings."""

    def __init__(self):
        self.real, self.runs, self.aliases = patient.launch_patiently, {}, {}

    def __call__(self, script, nproc=2, **settings):
        text = Path(script).read_text()
        text = self.aliases.get(text, text)
        key = (text, nproc, json.dumps(settings, default=repr, sort_keys=True))
        if key not in self.runs:
            run = self.real(script, nproc, **settings)
            kept = tempfile.mkdtemp(prefix="memo-")
            shutil.copytree(run.folder, kept, dirs_exist_ok=True)
            self.runs[key] = replace(run, folder=kept)
        # A fresh copy of the run's files each time: the trial reads the checkpoint, then
        # removes the folder.
        fresh = tempfile.mkdtemp(prefix="memo-")
        shutil.copytree(self.runs[key].folder, fresh, dirs_exist_ok=True)
        return replace(self.runs[key], folder=fresh)


@pytest.fixture(scope="module")
def launches():
    memo = Launches()
    patch = pytest.MonkeyPatch()
    patch.setattr(patient, "launch_patiently", memo)  # the trial looks it up there
    yield memo
    patch.undo()


@pytest.fixture
def script(tmp_path, launches):
    """Write a script text to a file; the check gets its path, as in the notebook."""
    def write(text: str, runs_like_the_solution: bool = False) -> Path:
        if runs_like_the_solution:  # a change that only matters on GPUs: reuse the CPU run
            launches.aliases[text] = SOLUTION
        path = tmp_path / f"ddp_train_{len(list(tmp_path.iterdir()))}.py"
        path.write_text(text)
        return path
    return write


@pytest.mark.slow
def test_ddp_solution_keeps_full_marks(script, capsys):
    passes(checks.check_ddp_script, script(SOLUTION), seeds=[1])
    out = capsys.readouterr().out
    assert "each of 2 epochs drew all 48 samples once" in out
    assert "As rank 3 (LOCAL_RANK 1) of a simulated node with two GPUs it picks nccl" in out
    assert "samples for rank 3 of 4; without a GPU (PyTorch's CUDA build) it picks gloo" in out


@pytest.mark.slow
def test_ddp_right_alternative_keeps_full_marks(script):
    passes(checks.check_ddp_script, script(RIGHT_ALTERNATIVE), seeds=[])


def share(script_path) -> float:
    return graded(checks.check_ddp_script, (script_path,), hidden=False, seed=0).fraction


@pytest.mark.slow
@pytest.mark.parametrize("edit, hint, points", [
    ((SET_EPOCH,), "nobody told it the epoch changed", 7 / 8),
    ((NO_SAMPLER,), "each rank drew all 48 samples: without a DistributedSampler", 7 / 8),
    ((EVERY_RANK_SAVES,), "The checkpoint was saved by rank(s) [0, 1]", 7 / 8),
    ((NO_DESTROY,), "Rank(s) [0, 1] ended with the process group still open", 7 / 8),
    ((NO_DDP, SAVE_MODEL), "the model was never wrapped in DDP", 5 / 8),
    ((PLAIN_FORWARD,), "the loop calls the plain model", 6 / 8),
    ((WHOLE_MODULE,), "The checkpoint holds Sequential…: not the model's state_dict", 7 / 8),
], ids=["no set_epoch", "no DistributedSampler", "every rank saves", "no destroy", "no DDP",
        "plain forward", "whole module saved"])
def test_ddp_mistakes_lose_their_case_only(script, edit, hint, points):
    path = script(changed(*edit))
    message = failure(checks.check_ddp_script, path)
    assert message.startswith("✘ ") and hint in message
    assert share(path) == pytest.approx(points)


@pytest.mark.slow
def test_two_mistakes_lose_two_cases_each_named(script):
    """Every rank prints, and rank 0 saves the wrapper's state_dict: one run, two cases."""
    path = script(changed(EVERY_RANK_PRINTS, WRAPPER_STATE))
    message = failure(checks.check_ddp_script, path)
    assert ("✘ only rank 0 prints: Rank(s) [0, 1] printed: each line appears once per rank"
            in message)
    assert "whose 'module.' keys a plain model cannot load" in message
    assert "✔ passed: each epoch, every sample exactly once" in message
    assert share(path) == pytest.approx(6 / 8)


@pytest.mark.slow
def test_nccl_on_a_cpu_machine_is_told_to_use_gloo(script):
    message = failure(checks.check_ddp_script, script(changed(NCCL)))
    assert "asked for the nccl backend on a machine without a GPU" in message
    assert "on the CPU use gloo" in message


@pytest.mark.slow
def test_device_ids_on_the_cpu_are_named(script):
    message = failure(checks.check_ddp_script, script(changed(DEVICE_IDS_ON_CPU)))
    assert "raised ValueError" in message and "on the CPU give DDP no device_ids" in message


@pytest.mark.slow
def test_a_rank_that_skips_a_collective_is_caught_quickly(script, launches):
    path = script(changed(HANGS))
    message = failure(checks.check_ddp_script, path)
    assert "the ranks are waiting for each other" in message
    assert "rank 0 last entered dist.barrier()" in message
    assert "a dist.barrier() that only rank 0 reaches" in message
    run = next(run for (text, *_), run in launches.runs.items() if "only rank 0 gets" in text)
    assert run.stalled and not run.timed_out  # ended by the stall rule, not the time limit


# Mistakes and right alternatives that only show on a GPU node or on another machine; the CPU
# run under torchrun cannot tell them from the solution.
NO_BINDING = (("        torch.cuda.set_device(device)\n", ""),
              (('    dist.init_process_group(backend, device_id=device if device.type == "cuda" '
               'else None)'), "    dist.init_process_group(backend)"))
LOCAL_RANK_SAMPLER = (("    sampler = DistributedSampler(config.dataset)",
                       ("    sampler = DistributedSampler(config.dataset, num_replicas=dist."
                       "get_world_size(), rank=local_rank)")),)
NCCL_IF_BUILT = (('        backend = "nccl"\n', ""), ('        backend = "gloo"\n', ""),
                 ("    dist.init_process_group(backend,",
                  ('    backend = "nccl" if dist.is_nccl_available() else "gloo"\n'
                  "    dist.init_process_group(backend,")))
SET_DEVICE_UNGUARDED = ((
    ('    if torch.cuda.is_available():\n        device = torch.device("cuda", local_rank)\n'
    "        torch.cuda.set_device(device)\n"),
    ("    torch.cuda.set_device(local_rank)\n    if torch.cuda.is_available():\n"
    '        device = torch.device("cuda", local_rank)\n')),)
WRONG_SET_UPS = {  # edits, the cause named
    "RANK for the GPU": ((GLOBAL_RANK,), ("RANK counts processes over all nodes, LOCAL_RANK on "
                         "this node")),
    "gloo on GPUs": ((ALWAYS_GLOO,), ("your script initialised 'gloo': NCCL is the backend for "
                     "NVIDIA GPUs")),
    "every rank on GPU 0": ((GPU_ZERO,), ("the model went to cuda:0: each rank needs its own GPU, "
                            "cuda:1 here")),
    "no set_device": (NO_BINDING, ("the current GPU was still cuda:0 at the DDP wrap, and the "
                      "process group was not bound to cuda:1")),
    "sampler given LOCAL_RANK": (LOCAL_RANK_SAMPLER, ("the DistributedSampler got rank=1 of "
                                 "num_replicas=4, not rank 3 of 4: with LOCAL_RANK given")),
    "nccl whenever built": (NCCL_IF_BUILT, ("a machine without a GPU, with PyTorch's CUDA build "
                            "(simulated), your script initialised 'nccl': NCCL needs GPUs")),
    "set_device without a GPU": (SET_DEVICE_UNGUARDED, ("a machine without a GPU, with PyTorch's "
                                 "CUDA build (simulated), your script raised RuntimeError")),
}
RIGHT_SET_UPS = {
    "torch.accelerator": (("        torch.cuda.set_device(device)\n",
                           "        torch.accelerator.set_device_index(local_rank)\n"),),
    "bound by device_id only": (("        torch.cuda.set_device(device)\n", ""),),
    "sampler told the rank": (("    sampler = DistributedSampler(config.dataset)",
                               ("    sampler = DistributedSampler(config.dataset, rank=rank, "
                               "num_replicas=dist.get_world_size(), shuffle=True)")),),
    "sampler before the wrap": (
        (("    ddp_model = DDP(model, device_ids=[local_rank] if device.type == \"cuda\" else None)"
         "\n    sampler = DistributedSampler(config.dataset)\n"),
         ("    sampler = DistributedSampler(config.dataset, seed=0)\n    ddp_model = DDP(model, "
         "device_ids=[local_rank] if device.type == \"cuda\" else None)\n")),),
}


@pytest.fixture(scope="module")
def node_rules():
    from course_utils.checks.lesson07 import ddp_node_rules
    return ddp_node_rules


def simulated_nodes(path, node_rules, node=None):
    """The script as one rank of the check's simulated GPU node and of its CPU machine."""
    from course_utils.checks import machines
    node = node or {"rank": 3, "local_rank": 1, "world_size": 4}
    return (check_ddp.simulate_rank(path, machines.TWO_GPUS, **node),
            check_ddp.simulate_rank(path, node_rules.CUDA_BUILD_WITHOUT_GPU, **node), node)


@pytest.mark.parametrize("name", list(WRONG_SET_UPS))
def test_gpu_set_up_mistakes_show_on_a_simulated_node(script, node_rules, name):
    """In-process, without torchrun: each mistake is caught and named, on one node or other."""
    edits, cause = WRONG_SET_UPS[name]
    gpu, cpu, node = simulated_nodes(script(changed(*edits)), node_rules)
    where = ("As rank 3 (LOCAL_RANK 1) of a simulated node with two GPUs", ("As rank 3 (LOCAL_RANK "
             "1) of a machine without a GPU, with PyTorch's CUDA build (simulated)"))
    with pytest.raises(checks.CheckFailure) as raised:
        node_rules.expect_right_gpu_node(gpu, node, where[0])
        node_rules.expect_right_cpu_node(cpu, node, where[1])
    assert cause in str(raised.value)


@pytest.mark.parametrize("name", ["solution", *RIGHT_SET_UPS])
def test_gpu_set_up_alternatives_pass_on_the_simulated_nodes(script, node_rules, name):
    text = SOLUTION if name == "solution" else changed(*RIGHT_SET_UPS[name])
    for node in ({"rank": 3, "local_rank": 1, "world_size": 4},
                 {"rank": 7, "local_rank": 1, "world_size": 8}):
        gpu, cpu, node = simulated_nodes(script(text), node_rules, node)
        node_rules.expect_right_gpu_node(gpu, node, "on the GPU node")
        node_rules.expect_right_cpu_node(cpu, node, "without a GPU")
        assert gpu.samplers == [{"rank": node["rank"], "num_replicas": node["world_size"]}]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["RANK for the GPU", "no set_device", "sampler given LOCAL_RANK",
                                  "nccl whenever built"])
def test_gpu_set_up_mistakes_lose_the_simulated_nodes_case_only(script, name):
    edits, cause = WRONG_SET_UPS[name]
    path = script(changed(*edits), runs_like_the_solution=True)
    message = failure(checks.check_ddp_script, path)
    assert message.startswith("✘ on simulated nodes: nccl and cuda:LOCAL_RANK with GPUs, gloo "
                              "without: ") and cause.split("(simulated), ")[-1] in message
    assert share(path) == pytest.approx(7 / 8)


@pytest.mark.slow
def test_gpu_set_up_alternative_keeps_full_marks(script):
    path = script(changed(*RIGHT_SET_UPS["torch.accelerator"]), runs_like_the_solution=True)
    passes(checks.check_ddp_script, path, seeds=[1])  # shares the solution test's launches


def test_the_stub_is_not_implemented_and_launches_nothing(script, launches):
    init = ('    dist.init_process_group(backend, device_id=device if device.type == "cuda" '
            'else None)\n')
    stub = changed((init, '    raise NotImplementedError()\n'))
    before = len(launches.runs)
    message = failure(checks.check_ddp_script, script(stub))
    assert "your script is not implemented yet" in message
    assert len(launches.runs) == before


def test_not_a_script_is_named():
    message = failure(checks.check_ddp_script, 42)
    assert "`script` is int, not the path of a script file" in message


def test_ddp_hidden_inputs_follow_the_seed_and_stay_even():
    made = [checks.check_ddp_script.make_inputs(seed, True) for seed in HIDDEN_SEEDS]
    assert len({json.dumps(inputs) for inputs in made}) > 1
    assert all(len(inputs["config"]["labels"]) % 2 == 0 for inputs in made)  # 2 ranks split it


def test_ddp_check_timeouts_fit_the_grader():
    inputs = checks.check_ddp_script.make_inputs(0, False)
    assert inputs["stall_s"] == ddp_check.STALL_S < inputs["timeout_s"] == ddp_check.TIMEOUT_S


def test_checks_import_without_torch():
    """The grader's workers import every check: torch must load only when a check runs."""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", ("import sys, course_utils.checks; "
                           "print('torch' in sys.modules)")], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"
    assert torch  # the test module itself uses torch


# ------------------------------------------------ a repeated epoch order: which cause, from the
# ranks' reports (made by hand: no torchrun)

def report_of(rank: int, passes: list, set_epochs: dict) -> RankReport:
    """A rank that drew ``passes`` (batches per epoch); ``set_epochs`` maps a pass to the
    set_epoch values called just before it (key len(passes): after the last)."""
    events = []
    for index, batches in enumerate([*passes, []]):
        events += [{"event": "set_epoch", "epoch": v} for v in set_epochs.get(index, [])]
        if index < len(passes):
            events += [{"event": "loader"}] + [{"event": "batch", "indices": b} for b in batches]
    return RankReport(rank, rank, 2, None, 0, events, "", None, None, 0, 0, False)


SHUFFLED, SORTED = ([[5, 1], [3, 7]], [[0, 4], [2, 6]]), ([[1, 3], [5, 7]], [[0, 2], [4, 6]])


@pytest.mark.parametrize("draws, set_epochs, cause", [
    (SHUFFLED, {}, "nobody told it the epoch changed"),
    (SHUFFLED, {0: [0], 1: [0], 2: [0]}, "set_epoch was given 0 every time"),
    (SHUFFLED, {1: [0], 2: [1], 3: [2]},
     "still had epoch 0: set_epoch ran after the loop over the loader had started"),
    (SHUFFLED, {0: [0]}, "set_epoch was called once, with 0, not at the start of every epoch"),
    (SORTED, {0: [0], 1: [1], 2: [2]}, "the sampler did not shuffle at all (shuffle=False?)"),
    (SHUFFLED, {0: [0], 1: [1], 2: [2]}, "it was not told to the sampler the DataLoader draws"),
], ids=["never told", "always 0", "told after the loop", "told once", "no shuffle",
        "another sampler told"])
def test_a_repeated_order_names_what_the_reports_show(draws, set_epochs, cause):
    from course_utils.checks.lesson07.ddp_script_rules import CASES
    rule = {name: rule for name, _, rule in CASES}["a new order every epoch (sampler.set_epoch)"]
    ranks = [report_of(rank, [draws[rank]] * 3, set_epochs) for rank in (0, 1)]
    with pytest.raises(checks.CheckFailure) as raised:
        rule(ranks, None, epoch_coverage(ranks))
    message = str(raised.value)
    assert message.startswith("Epoch 1 drew the samples in the same order as epoch 0: ")
    assert cause in message.split("How to fix it")[0]


# ================================================================ evidence

def test_a_checkpoint_is_read_without_trusting_it(tmp_path):
    """rank 0's checkpoint is the evidence a grader reads itself: a state_dict (or the whole
    course model) gives the weights; a link is not followed; a pickle that would run code is
    not unpickled."""
    from course_utils.checks.distributed.evidence import read_checkpoint
    from course_utils.lab.distributed import RunConfig

    model = RunConfig.example().build_model()
    torch.save(model.state_dict(), tmp_path / "state.pt")
    torch.save({f"module.{k}": v for k, v in model.state_dict().items()}, tmp_path / "ddp.pt")
    torch.save(model, tmp_path / "module.pt")
    weights = [p.detach().double().tolist() for p in model.parameters()]
    for name, kind in (("state.pt", "state_dict"), ("ddp.pt", "state_dict"),
                       ("module.pt", "module")):
        facts = read_checkpoint(tmp_path / name)
        assert (facts.kind, facts.parameters) == (kind, weights), name
    (tmp_path / "link.pt").symlink_to(tmp_path / "state.pt")
    assert read_checkpoint(tmp_path / "link.pt").kind == "unreadable"
    assert read_checkpoint(tmp_path / "absent.pt").kind == "missing"

    class RunsCode:
        def __reduce__(self):
            return (print, ("this must never run",))

    torch.save(RunsCode(), tmp_path / "code.pt")
    assert read_checkpoint(tmp_path / "code.pt").kind == "unreadable"


@pytest.mark.slow
def test_reports_the_checkpoint_does_not_confirm_earn_nothing(script):
    """A script that writes the ranks' reports of a right run itself, without DDP, training or
    checkpoint: nothing confirms them, and the check says so."""
    from ...test_grading_evidence import FORGED_SCRIPT

    path = script(FORGED_SCRIPT.split("\n", 1)[1])
    message = failure(checks.check_ddp_script, path)
    assert message.startswith("Nothing confirms what the ranks did: rank 0 saved no checkpoint")
    assert share(path) == 0
