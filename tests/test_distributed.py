"""course_utils.lab.distributed: RunConfig, launch() with real torchrun (gloo, 2 CPU ranks);
and the check's simulated rank and reference weights (course_utils.checks.distributed).

Each torchrun run costs a few seconds of start-up (three Python processes import torch), so
the runs are shared by module-scoped fixtures: two launches at once (which must not clash),
and one that hangs.
"""
from __future__ import annotations

import json
import os
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from course_utils import distributed
from course_utils.checks import machines
from course_utils.checks.distributed import simulate_rank
from course_utils.checks.distributed.reference import global_steps, reference_parameters
from course_utils.lab.distributed import (
    Launch,
    RankReport,
    RunConfig,
    epoch_coverage,
    launch,
    max_difference,
)

SCRIPT = textwrap.dedent('''
    import os
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, DistributedSampler
    from course_utils.lab.distributed import RunConfig

    def main():
        config = RunConfig.from_environment()
        local_rank = int(os.environ["LOCAL_RANK"])
        gpu = torch.cuda.is_available()
        device = torch.device("cuda", local_rank) if gpu else torch.device("cpu")
        if gpu:
            torch.cuda.set_device(device)
        dist.init_process_group("nccl" if gpu else "gloo")
        model = config.build_model().to(device)
        ddp_model = DDP(model, device_ids=[local_rank] if gpu else None)
        sampler = DistributedSampler(config.dataset)
        loader = DataLoader(config.dataset, batch_size=config.batch_size, sampler=sampler)
        optimizer = torch.optim.SGD(ddp_model.parameters(), lr=config.lr)
        for epoch in range(config.epochs):
            sampler.set_epoch(epoch)
            for features, labels in loader:
                optimizer.zero_grad()
                F.cross_entropy(ddp_model(features.to(device)), labels.to(device)).backward()
                optimizer.step()
        if dist.get_rank() == 0:
            print("done")
            torch.save(ddp_model.module.state_dict(), config.checkpoint)
        dist.barrier()
        dist.destroy_process_group()

    if __name__ == "__main__":
        main()
''')

HANGS = "import time\nimport torch.distributed as dist\ndist.init_process_group('gloo')\n" \
        "time.sleep(600)\n"


@pytest.fixture(scope="module")
def scripts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scripts")
    (folder / "train.py").write_text(SCRIPT)
    (folder / "hangs.py").write_text(HANGS)
    return folder


@pytest.fixture(scope="module")
def two_runs(scripts) -> list[Launch]:
    """Two launches at the same time, as two grading kernels would start them."""
    config = RunConfig.example(seed=3, samples=20, batch_size=3, epochs=2)
    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(lambda _: launch(scripts / "train.py", 2, config=config,
                                              timeout=120, hide_gpus=True), range(2)))
    yield runs
    for run in runs:
        distributed.remove(run)


# ------------------------------------------------------------------ RunConfig

def test_example_is_seeded_and_travels_as_json():
    """Checks the example data follow the seed and survive a JSON round trip."""
    config = RunConfig.example(seed=1, samples=10)
    assert RunConfig.example(seed=1, samples=10) == config != RunConfig.example(seed=2, samples=10)
    assert RunConfig.from_json(config.to_json()) == config
    assert len(config.features) == len(config.labels) == 10
    assert set(config.labels) <= {0, 1, 2}


@pytest.mark.parametrize("change, message", [
    ({"samples": 0}, "samples must be a positive whole number, got 0"),
    ({"batch_size": 2.5}, "batch_size must be a positive whole number, got 2.5"),
    ({"epochs": True}, "epochs must be a positive whole number, got True"),
    ({"lr": -1}, "lr must be a positive number, got -1"),
])
def test_example_rejects_bad_settings(change, message):
    """Checks each bad setting is named with the value it got and what is allowed."""
    with pytest.raises(ValueError, match=message):
        RunConfig.example(**change)


def test_from_environment_reads_the_file_or_falls_back(tmp_path, monkeypatch):
    """Checks from_environment() reads $COURSE_DDP_CONFIG, else gives the example."""
    monkeypatch.delenv(distributed.CONFIG_ENV, raising=False)
    assert RunConfig.from_environment() == RunConfig.example()
    config = RunConfig.example(seed=9, samples=6)
    (tmp_path / "config.json").write_text(config.to_json())
    monkeypatch.setenv(distributed.CONFIG_ENV, str(tmp_path / "config.json"))
    assert RunConfig.from_environment() == config


def test_dataset_and_model_come_from_the_numbers():
    """Checks the dataset holds the features and labels, and the model the weights."""
    config = RunConfig.example(seed=4, samples=8)
    features, label = config.dataset[3]
    assert features.tolist() == pytest.approx(config.features[3])
    assert int(label) == config.labels[3]
    assert config.dataset is config.dataset  # sampler and loader must share one object
    model = config.build_model()
    assert torch.allclose(model[0].weight, torch.tensor(config.weights["w1"]))


# ------------------------------------------------------------------ reports, without torchrun

def report(rank: int, passes: list[list[list[int]]], **changes) -> RankReport:
    events = [{"event": "init", "backend": "gloo"}]
    for batches in passes:
        events += [{"event": "loader"}] + [{"event": "batch", "indices": b} for b in batches]
    return RankReport(**{
        "rank": rank, "local_rank": rank, "world_size": 2, "master_port": 1, "visible_gpus": 0,
        "events": events, "printed": "", "error": None, "parameters": None, "ddp_forwards": 0,
        "model_forwards": 0, "initialized_at_exit": False, **changes})


def test_epoch_coverage_counts_draws_per_rank_and_repeats():
    """Checks coverage sees a clean split, and every sample drawn twice without a sampler."""
    split = epoch_coverage([report(0, [[[0, 2]], [[3, 1]]]), report(1, [[[1, 3]], [[0, 2]]])])
    assert [(c.per_rank, c.distinct, c.repeated) for c in split] == [([2, 2], 4, 0)] * 2
    assert split[0].order == [0, 2, 1, 3]
    everything = epoch_coverage([report(0, [[[0, 1, 2, 3]]]), report(1, [[[0, 1, 2, 3]]])])
    assert (everything[0].distinct, everything[0].repeated) == (4, 4)


def test_global_steps_pair_the_ranks_batches():
    """Checks step k holds the k-th batch of every rank, epoch after epoch."""
    reports = [report(0, [[[0], [2]], [[1]]]), report(1, [[[1], [3]], [[0]]])]
    assert global_steps(reports) == [[[0], [1]], [[2], [3]], [[1], [0]]]


def test_reference_averages_the_ranks_like_one_full_batch():
    """Checks averaging two equal half-batches' losses is one step on the whole batch."""
    config = RunConfig.example(seed=5, samples=8, lr=0.3)
    halves = reference_parameters(config, [[[0, 1, 2, 3], [4, 5, 6, 7]]])
    whole = reference_parameters(config, [[[0, 1, 2, 3, 4, 5, 6, 7]]])
    assert max_difference(halves, whole) < 1e-6
    assert max_difference(whole, reference_parameters(config, [])) > 1e-3  # it did train


def test_max_difference_needs_matching_shapes():
    """Checks parameter lists of different lengths are an error, not a silent match."""
    with pytest.raises(ValueError):
        max_difference([[1.0]], [[1.0], [2.0]])


# ------------------------------------------------------------------ launch

def test_launch_rejects_bad_arguments(tmp_path):
    """Checks a missing script, a bad process count and a bad timeout are named."""
    with pytest.raises(ValueError, match="no script file at"):
        launch(tmp_path / "missing.py")
    (tmp_path / "s.py").write_text("")
    with pytest.raises(ValueError, match="nproc must be a positive whole number, got 0"):
        launch(tmp_path / "s.py", 0)
    with pytest.raises(ValueError, match="timeout must be a positive number, got -1"):
        launch(tmp_path / "s.py", timeout=-1)


def test_command_is_torchrun_standalone(tmp_path):
    """Checks the command is torchrun --standalone with one process per rank, run via our runner."""
    command = distributed.torchrun_command(tmp_path / "s.py", 4)
    assert "--standalone" in command and "--nproc_per_node=4" in command
    assert command[-3:] == ["-m", "course_utils.lab.distributed", str(tmp_path / "s.py")]


def test_shell_command_reads_as_typed():
    """Checks a run's command is shown as `torchrun ...`, whichever way it was started."""
    for launcher in (["/venv/bin/torchrun"], ["/venv/bin/python", "-m", "torch.distributed.run"]):
        run = Launch([*launcher, "--standalone", "s.py"], 0, False, 1.0, "", [], "/tmp")
        assert run.shell_command == "torchrun --standalone s.py"


def test_where_ranks_stopped_names_each_ranks_last_step():
    """Checks a stopped run says where each unfinished rank was."""
    progress = [{"rank": 0, "events": [{"event": "init", "backend": "gloo"},
                                       {"event": "barrier"}]},
                {"rank": 1, "events": []}]
    run = Launch(["torchrun"], -9, False, 9.0, "", [], "/tmp", [0, 1], progress, stalled=True)
    assert run.where_ranks_stopped() == ("rank 0 last entered dist.barrier(); "
                                         "rank 1 had not reached init_process_group")
    assert not run.succeeded


def _report(rank: int, error: dict | None = None) -> RankReport:
    return RankReport(rank, rank, 2, 1234, 0, [], "", error, None, 0, 0, False)


TEARDOWN_ABORT = """epoch 1: loss 0.5
terminate called without an active exception
E1125 torch.distributed.elastic.multiprocessing.api:[ERROR] failed (exitcode: -6) local_rank: 1
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
  exitcode  : -6 (pid: 4242)
  traceback : Signal 6 (SIGABRT) received by PID 4242
"""


def test_a_run_that_died_after_every_rank_reported_is_told_apart():
    """Checks a teardown crash is seen as such, and a real failure or a missing rank is not."""
    died = Launch(["torchrun"], 1, False, 9.0, TEARDOWN_ABORT, [_report(0), _report(1)], "/tmp")
    assert died.died_after_reporting(2)
    assert died.error_line() == "terminate called without an active exception"
    failed = Launch(["torchrun"], 1, False, 9.0, "", [_report(0, {"type": "ValueError"}),
                                                     _report(1)], "/tmp")
    missing = Launch(["torchrun"], 1, False, 9.0, "", [_report(0)], "/tmp")
    finished = Launch(["torchrun"], 0, False, 9.0, "", [_report(0), _report(1)], "/tmp")
    assert not any(run.died_after_reporting(2) for run in (failed, missing, finished))
    assert missing.error_line() == "(no output)"


@pytest.mark.slow
def test_two_launches_at_once_get_their_own_ports(two_runs):
    """Checks two simultaneous runs both succeed, each on its own rendezvous port."""
    assert all(run.succeeded for run in two_runs), two_runs[0].output
    ports = [{r.master_port for r in run.ranks} for run in two_runs]
    assert all(len(p) == 1 for p in ports) and ports[0] != ports[1]


@pytest.mark.slow
def test_ranks_report_what_they_did(two_runs):
    """Checks each rank's report: backend, set_epoch, one save on rank 0, clean exit."""
    run = two_runs[0]
    assert [r.rank for r in run.ranks] == [0, 1] and run.started == [0, 1]
    for rank in run.ranks:
        assert [e["backend"] for e in rank.named("init")] == ["gloo"]
        assert [e["epoch"] for e in rank.named("set_epoch")] == [0, 1]
        assert rank.named("destroy") and not rank.initialized_at_exit
        assert rank.ddp_forwards == rank.model_forwards > 0
    assert [len(r.named("save")) for r in run.ranks] == [1, 0]
    assert run.ranks[0].printed == "done\n" and run.ranks[1].printed == ""
    assert Path(run.folder, "checkpoint.pt").exists()
    assert json.loads(Path(run.folder, "config.json").read_text())["checkpoint"] == str(
        Path(run.folder, "checkpoint.pt"))  # launch() moves the checkpoint into the run's folder


@pytest.mark.slow
def test_two_ranks_equal_one_process_and_see_each_sample_once(two_runs):
    """Checks the lesson's claims: one process on the full batch, each sample once per epoch."""
    run = two_runs[0]
    config = RunConfig.from_json(Path(run.folder, "config.json").read_text())
    for epoch in epoch_coverage(run.ranks):
        assert (epoch.per_rank, epoch.distinct, epoch.repeated) == ([10, 10], 20, 0)
    expected = reference_parameters(config, global_steps(run.ranks))
    assert max_difference(run.ranks[0].parameters, expected) < 1e-5
    assert max_difference(run.ranks[0].parameters, run.ranks[1].parameters) == 0


@pytest.mark.slow
def test_a_hanging_run_is_killed_at_the_timeout(scripts):
    """Checks a run past its timeout is reported as such and leaves no process behind."""
    run = launch(scripts / "hangs.py", 2, timeout=15, hide_gpus=True)
    try:
        assert run.timed_out and not run.succeeded and run.ranks == []
        pids = [int(f.read_text()) for f in Path(run.folder).glob("rank*.pid")]
        deadline = time.monotonic() + 10  # SIGKILL is delivered asynchronously
        while any(map(running, pids)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(map(running, pids))
    finally:
        distributed.remove(run)


def running(pid: int) -> bool:
    """Whether a process is alive; a killed one that nobody has reaped yet (a zombie) is not."""
    if not Path("/proc").is_dir():  # macOS: no zombie test, just existence
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


@pytest.mark.gpu
def test_launch_on_the_gpus_uses_nccl(scripts):
    """Checks one rank per GPU with nccl trains like one process (needs CUDA)."""
    gpus = torch.cuda.device_count()
    config = RunConfig.example(seed=2, samples=8 * gpus)
    run = launch(scripts / "train.py", gpus, config=config, timeout=300)
    try:
        assert run.succeeded, run.output
        assert {e["backend"] for r in run.ranks for e in r.named("init")} == {"nccl"}
        assert all(r.visible_gpus == gpus for r in run.ranks)
        expected = reference_parameters(config, global_steps(run.ranks))
        assert max_difference(run.ranks[0].parameters, expected) < 1e-4
    finally:
        distributed.remove(run)


# ------------------------------------------------------------------ simulate_rank

def test_simulated_rank_on_a_gpu_node_reports_backend_and_device(scripts):
    """Checks a simulated rank 3 (LOCAL_RANK 1) of a 2-GPU node picks nccl and cuda:1."""
    before = dict(os.environ)
    seen = simulate_rank(scripts / "train.py", machines.TWO_GPUS, rank=3, local_rank=1,
                         world_size=4)
    assert (seen.init_called, seen.backend, seen.model_device, seen.ddp_device_ids,
            seen.reached_ddp, seen.error) == (True, "nccl", "cuda:1", [1], True, None)
    assert seen.set_device == ["cuda:1"]
    assert dict(os.environ) == before and not torch.cuda.is_available()
    assert not torch.distributed.is_initialized()


def test_simulated_rank_on_a_cpu_machine_picks_gloo(scripts):
    """Checks the same script on a simulated machine without GPUs keeps the CPU and gloo."""
    seen = simulate_rank(scripts / "train.py", machines.CPU, rank=1, local_rank=1, world_size=2)
    assert (seen.backend, seen.model_device, seen.ddp_device_ids) == ("gloo", "cpu", None)


def test_simulated_rank_reports_the_scripts_error(tmp_path):
    """Checks an error in the script comes back as data with the script's line."""
    (tmp_path / "bad.py").write_text("import os\nrank = int(os.environ['NO_SUCH_VARIABLE'])\n")
    seen = simulate_rank(tmp_path / "bad.py", machines.TWO_GPUS, rank=0, local_rank=0,
                         world_size=2)
    assert seen.error["type"] == "KeyError" and seen.error["line"]["lineno"] == 2
    assert not seen.reached_ddp


def test_a_rank_traceback_shows_the_script_not_the_runner(tmp_path, capsys):
    """Checks a failing script's traceback in a rank's output names the script's own lines and
    the error, without runpy's or the course's frames (the recorder's patches, argument checks)."""
    import runpy

    from course_utils.lab.distributed.rank import print_script_traceback

    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""\
        from course_utils.lab.args import positive_int

        def epochs():
            return positive_int(-1, "epochs", "train")

        epochs()
        """))
    with pytest.raises(ValueError) as raised:
        runpy.run_path(str(script), run_name="__main__")
    print_script_traceback(raised.value)
    shown = capsys.readouterr().err
    assert f'File "{script}", line 4, in epochs' in shown and "ValueError" in shown, shown
    assert 'File "<frozen runpy>"' not in shown and "runpy.py" not in shown, shown
    assert "course_utils/" not in shown, shown  # positive_int's own frame is left out
