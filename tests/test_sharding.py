"""course_utils.lab.sharding and .pipeline_parallel on their CPU path: typed records, byte
counts, argument errors, the cut of a model into stages, a pipelined step against the whole model.

The launch itself runs in the lesson under nbval (solutions/09_sharding); here only what can
fail without starting processes, and the NCCL path on a machine with two GPUs (-m gpu).
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist

from course_utils import pipeline_parallel, sharding

from .conftest import ROOT


def records() -> sharding.RankResults:
    return sharding.RankResults(
        0, 2, "cpu", [sharding.StrategyRecord("fsdp", 8, 8, 16, 0.01, 0.0)],
        [sharding.CollectiveTiming("all_gather", 1024, 1e-4)],
        [sharding.ProfiledCommunication("fsdp", {"gloo:all_gather": 9}, 0.1)], {"x": 1},
        [sharding.PipelineRecord(4, 0.1, 0.08, None, 0.0, 1e-9)])


def test_results_travel_as_json_and_come_back_typed():
    back = sharding.RankResults.from_dict(json.loads(json.dumps(asdict(records()))))
    assert back == records()
    assert back.strategy("fsdp").optimizer_bytes == 16
    assert back.pipeline[0].busy_seconds == 0.08 and back.pipeline[0].loss_difference is None
    with pytest.raises(KeyError, match=r"no strategy 'ddp'.*\['fsdp'\]"):
        back.strategy("ddp")


def test_save_results_needs_run_ranks_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(sharding.RESULTS_ENV, raising=False)
    with pytest.raises(RuntimeError, match="run_ranks"):
        sharding.save_results(records())
    monkeypatch.setenv(sharding.RESULTS_ENV, str(tmp_path))
    path = sharding.save_results(records())
    assert path == tmp_path / "rank0.json" and json.loads(path.read_text())["world_size"] == 2


def test_run_ranks_and_time_collective_refuse_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="no script file"):
        sharding.run_ranks(tmp_path / "missing.py")
    script = tmp_path / "s.py"
    script.write_text("")
    for bad in ({"nproc": 0}, {"timeout": -1}):
        with pytest.raises(ValueError, match="run_ranks"):
            sharding.run_ranks(script, **bad)
    with pytest.raises(ValueError, match="operation must be one of"):
        sharding.time_collective("broadcast", 1024, "cpu")


def test_command_is_torchrun_standalone_with_the_script():
    command = sharding.torchrun_command("s.py", 2)
    assert command[-3:] == ["--standalone", "--nproc-per-node=2", "s.py"]


@pytest.fixture
def one_rank_group():
    if dist.is_initialized():
        pytest.skip("a process group is already open in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_bytes_count_shards_and_skip_missing_gradients(one_rank_group):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (1,))
    sharded = distribute_tensor(torch.ones(6, 4), mesh, [Shard(0)])
    assert sharding.local_bytes([sharded, None, torch.ones(3, dtype=torch.float16)]) == 96 + 6
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    assert sharding.optimizer_state_bytes(optimizer) == 2 * 15 * 4  # the step counts left out


def test_communication_in_sums_the_backends_collectives():
    from torch.autograd import DeviceType

    def event(name, cpu, device=0.0, kind=DeviceType.CPU):
        return SimpleNamespace(name=name, cpu_time_total=cpu, device_time_total=device,
                               device_type=kind)
    trace = SimpleNamespace(events=lambda: [
        event("gloo:all_reduce", 2000.0), event("gloo:all_reduce", 1000.0),
        event("aten::mm", 5000.0), event("nccl:all_gather", 10.0, 500.0),  # its kernel's time
        event("ncclDevKernel_AllGather", 0.0, 500.0, DeviceType.CUDA)])
    found = sharding.communication_in(trace, "ddp")
    assert found.calls == {"gloo:all_reduce": 2, "ncclDevKernel_AllGather": 1}
    assert found.seconds == pytest.approx(3.5e-3)


def test_stages_hold_every_layer_once_in_order_and_evenly():
    for layers, stages in ((5, 2), (17, 8), (3, 3), (4, 1)):
        bounds = [pipeline_parallel.stage_bounds(layers, s, stages) for s in range(stages)]
        assert [i for b in bounds for i in b] == list(range(layers))
        assert max(map(len, bounds)) - min(map(len, bounds)) <= 1
    for bad, message in (((2, 0, 3), "at most the 2 layers"), ((5, 2, 2), "from 0 to 1"),
                         ((5, 0, 0), "stages must be a positive")):
        with pytest.raises(ValueError, match=message):
            pipeline_parallel.stage_bounds(*bad)


def test_stage_layers_chained_are_the_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4),
                                torch.nn.Tanh(), torch.nn.Linear(4, 2))
    stages = [pipeline_parallel.stage_layers(model, s, 2) for s in range(2)]
    features = torch.randn(3, 4)
    assert torch.equal(stages[1](stages[0](features)), model(features))
    names = [name for stage in stages for name, _ in stage.named_parameters()]
    assert names == [name for name, _ in model.named_parameters()]  # each once, same names
    with pytest.raises(TypeError, match="nn.Sequential"):
        pipeline_parallel.stage_layers(torch.nn.Linear(2, 2), 0, 1)


def test_a_pipelined_step_trains_as_the_whole_model(one_rank_group):
    """One rank, one stage, the batch in two micro-batches through the real GPipe schedule:
    the gradients are averaged over the micro-batches, as the whole batch's mean loss gives."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    generator = torch.Generator().manual_seed(1)
    batches = [(torch.randn(8, 6, generator=generator),
                torch.randint(0, 3, (8,), generator=generator)) for _ in range(3)]
    whole = pipeline_parallel.train_whole(model, batches, 0.5)
    stage = pipeline_parallel.TimedStage(pipeline_parallel.stage_layers(model, 0, 1), 0, 1,
                                         torch.device("cpu"))
    record = pipeline_parallel.train_stage(stage, 2, batches, 0.5, whole)
    assert record.micro_batches == 2 and 0 < record.busy_seconds <= record.step_seconds
    assert max(record.loss_difference, record.gradient_difference,
               record.weight_difference) < 1e-6
    with pytest.raises(ValueError, match="at least 2 batches"):
        pipeline_parallel.train_stage(stage, 2, batches[:1], 0.5, whole)


@pytest.mark.gpu
def test_the_lesson_script_runs_on_two_gpus_with_nccl(tmp_path):
    if torch.cuda.device_count() < 2:
        pytest.skip("one rank per GPU needs two GPUs; one GPU shared by two ranks is no test")
    import nbformat

    notebook = nbformat.read(ROOT / "solutions" / "09_sharding" / "sharding.ipynb", 4)
    cell = next(c for c in notebook.cells if c.get("id") == "script")
    script = Path(tmp_path, "sharding_run.py")
    script.write_text(cell.source.split("\n", 1)[1])
    run = sharding.run_ranks(script, timeout=300)
    assert run.succeeded, run.output[-3000:]
    first = run.ranks[0]
    assert first.device.startswith("cuda") and len(run.ranks) == torch.cuda.device_count()
    ddp, fsdp = first.strategy("ddp"), first.strategy("fsdp")
    assert fsdp.parameter_bytes <= ddp.parameter_bytes / first.world_size * 1.01
    assert fsdp.difference_from_ddp < 1e-5
    assert any(name.startswith("nccl") for p in first.profiled for name in p.calls)
    for rank in run.ranks:  # a pipeline of one stage per GPU, trained as the whole model
        assert [r.micro_batches for r in rank.pipeline] == [1, 2, 4, 8]
        assert all(r.gradient_difference < 1e-5 and r.weight_difference < 1e-5
                   and 0 < r.busy_seconds < r.step_seconds for r in rank.pipeline)
