"""The table of host reads (course_utils/probe/syncs.py): on a CPU grader, and on CUDA.

On the CPU every example of the table runs under the probes' counter, which must count exactly
the entries marked as reads, once each. With a GPU (`pytest -m gpu`), every example runs under
`torch.cuda.set_sync_debug_mode("error")`, which must do what the entry says: raise, stay
silent, or, for NumPy's conversions, refuse the device tensor; every disagreement is listed.
"""
from __future__ import annotations

import io
import types
import warnings

import pytest
import torch

from course_utils.probe import HOST_READS, host_read_counter, read_by
from course_utils.probe.syncs import _CONDITIONS


def operands(device) -> types.SimpleNamespace:
    """What the table's examples use, on `device`; `host` is a CPU tensor on any machine."""
    device = torch.device(device)
    on = {"device": device}
    return types.SimpleNamespace(
        loss=torch.tensor(0.25, **on), x=torch.tensor([0.5, -1.0, 2.0, 0.0], **on),
        mask=torch.tensor([True, False, True, False], **on), flag=torch.tensor(True, **on),
        index=torch.tensor([2, 0, 1, 3], **on), counts=torch.tensor([1, 2, 3, 0], **on),
        host=torch.zeros(4), device=device, sink=io.StringIO())


def test_every_entry_is_complete_and_its_condition_exists():
    """Checks each entry names a source, a known CUDA outcome, and a condition the counter has."""
    for entry in HOST_READS:
        assert entry.source and entry.cuda in ("raises", "silent", "refuses"), entry.spelling
        assert entry.when in _CONDITIONS or (entry.when == "-" and not entry.reads), entry
        # A read the debug mode does not raise for, or a raise that is not a read: say why.
        agrees = entry.reads == (entry.cuda == "raises")
        assert agrees or entry.note, f"{entry.spelling}: say why the debug mode disagrees"


@pytest.mark.parametrize("entry", HOST_READS, ids=[entry.spelling for entry in HOST_READS])
def test_the_counter_counts_exactly_the_reads_on_a_cpu_grader(entry):
    """Checks each example, on CPU tensors standing in for a GPU's, is counted once if a read."""
    given = operands("cpu")
    log = []
    with host_read_counter(log, "read", device_handles=[given.device]) as counter:
        counter.judge.mark_host(given.host)
        entry.example(given)
    assert log == (["read"] if entry.reads else [])
    assert [read.op for read in counter.reads] == ([entry.op] if entry.reads else [])


def test_host_copies_on_a_cpu_grader_are_copies():
    """Checks .cpu() of a stand-in is a new tensor, so that later reads of the original count."""
    loss = torch.tensor(0.5)
    log = []
    with host_read_counter(log, "read"):
        copy = loss.cpu()
        copy.numpy()  # a host tensor: not a read
        assert copy is not loss
        float(loss)
    assert log == ["read", "read"]


def test_tensors_made_without_a_device_live_on_the_host():
    """Checks a tensor built on the host (as on a GPU machine) is not a device read, while
    one built on the device the learner's tensors name is."""
    loss = torch.tensor(0.5)
    log = []
    with host_read_counter(log, "read"):
        torch.zeros(()).item()
        (torch.zeros(()) + loss).item()  # a host scalar with a device tensor: on the device
        torch.zeros((), device=loss.device).item()
        loss.to(loss.device).item()
        total = torch.zeros(())
        total += loss  # on a GPU this raises: the total was meant to be on the device
        total.item()
        host = torch.ones(())
        uploaded = host.to(loss.device)
        host.item(), uploaded.item()  # the upload's copy is a device tensor, the host's is not
    assert log == ["read"] * 5


def test_a_meta_judge_counts_meta_tensors_only():
    """Checks the meta device's stand-in (lesson 04): reads of meta tensors, not of CPU ones."""
    log = []
    with host_read_counter(log, "read", meta=True):
        torch.ones(2).tolist()
        for copy in (torch.Tensor.cpu, lambda meta: meta.to("cpu")):
            with pytest.raises(NotImplementedError):  # a meta tensor has no values to copy
                copy(torch.ones(2, device="meta"))
    assert log == ["read", "read"]


def test_read_by_names_the_entry():
    """Checks read_by returns the table's entry for a call, None for a queued operation."""
    from course_utils.probe import DeviceJudge

    x = torch.ones(3)
    judge = DeviceJudge()
    assert read_by(torch.Tensor.to, (x, "cpu"), {}, judge).spelling == "loss.to('cpu')"
    assert read_by(torch.Tensor.to, (x, "cpu"), {"non_blocking": True}, judge) is None
    assert read_by(torch.Tensor.add, (x, x), {}, judge) is None


def sync_debug_mode(mode: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PyTorch warns once that the mode is a prototype
        torch.cuda.set_sync_debug_mode(mode)


def outcome_on_cuda(entry, given) -> str:
    """What set_sync_debug_mode('error') makes of one example: raises, refuses or silent."""
    torch.cuda.synchronize()
    sync_debug_mode("error")
    try:
        entry.example(given)
    except RuntimeError as error:
        if "synchroniz" not in str(error):
            return f"raised another error: {error}"
        return "raises"
    except TypeError as error:
        return "refuses" if "numpy" in str(error) else f"raised another error: {error}"
    finally:
        sync_debug_mode("default")
    return "silent"


@pytest.mark.gpu
def test_the_table_agrees_with_cudas_sync_debug_mode():
    """Checks each entry's CUDA outcome under set_sync_debug_mode('error'); lists every miss."""
    given = operands("cuda")
    torch.cuda.synchronize()
    seen = {entry.spelling: outcome_on_cuda(entry, given) for entry in HOST_READS}
    wrong = [f"{entry.spelling}: the table says {entry.cuda}, CUDA {seen[entry.spelling]}"
             for entry in HOST_READS if seen[entry.spelling] != entry.cuda]
    assert not wrong, "\n".join(wrong)


# ------------------------------------------------------------------ the checks that count reads

# Reads the probes missed before the table: on a CPU grader they dispatch no scalar read
# (`.to("cpu")` of a CPU tensor is the tensor itself; nonzero and equal size and compare on the
# host), or they were spied on under another name only.
MISSED_BEFORE = {
    "loss.to('cpu')": lambda loss: loss.to("cpu"),
    "loss.to(torch.device('cpu'))": lambda loss: loss.to(torch.device("cpu")),
    "loss.detach().to(device='cpu')": lambda loss: loss.detach().to(device="cpu"),
    "host.copy_(loss)": lambda loss: torch.zeros(()).copy_(loss),
    "torch.tensor([loss])": lambda loss: torch.tensor([loss.detach()]),
    "loss[loss > 1]": lambda loss: loss.detach()[loss.detach() > 1],
    "torch.equal(loss, best)": lambda loss: torch.equal(loss.detach(), torch.zeros_like(loss)),
    "loss.nonzero()": lambda loss: loss.nonzero(),
}
# Reads the lesson 01 probe missed (it spied on a few Tensor methods by name).
MISSED_BY_LESSON_01 = {**MISSED_BEFORE, "print(loss)": lambda loss: print(loss, file=io.StringIO()),
                       "f'{loss}' of a vector": lambda loss: f"{loss.reshape(1)}"}


@pytest.mark.parametrize("spelling", MISSED_BEFORE)
def test_train_without_syncs_counts_every_spelling_of_a_read(spelling):
    """Checks lesson 08's check finds each read inside the loop, as a GPU would wait for it."""
    from course_utils import checks

    from .probe_roundtrip import failure

    read = MISSED_BEFORE[spelling]

    def train(model, batches, loss_fn, optimizer):
        total = None
        for features, labels in batches:
            optimizer.zero_grad()
            loss = loss_fn(model(features), labels)
            loss.backward()
            optimizer.step()
            total = loss.detach() if total is None else total + loss.detach()
            read(loss)
        return total.item() / len(batches)

    assert "inside the loop" in failure(checks.check_train_without_syncs, train)


@pytest.mark.parametrize("spelling", MISSED_BY_LESSON_01)
def test_train_and_log_counts_every_spelling_of_a_read(spelling):
    """Checks lesson 01's check counts each read at every step, not only .item() and float()."""
    from course_utils import checks

    from .probe_roundtrip import failure

    read = MISSED_BY_LESSON_01[spelling]

    def train_and_log(step, n_steps, log_every):
        logged, running = [], None
        for i in range(n_steps):
            loss = step().detach()
            read(loss)
            running = loss if running is None else running + loss
            if (i + 1) % log_every == 0:
                logged.append(running.item() / log_every)
                running = None
        return logged

    assert "copied a tensor to the CPU" in failure(checks.check_train_and_log, train_and_log)
