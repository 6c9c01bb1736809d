"""What the grading side takes from a submission is bounded, and what it leaves is removed.

Unit-sized versions of the hostile submissions of issue 28 (the whole-class versions, which
grade real kernels, are in test_grading_hostile.py, `make test-hostile`): a message of many
frames, messages the grader discards, a checkpoint whose tensors expand, a scratch tree
deeper than Python's recursion, with links, closed folders and odd names.
"""
from __future__ import annotations

import io
import os
import shutil
import signal

import pytest
import torch
import zmq
from jupyter_client.session import Session

from course_utils.checks.distributed.evidence import MODEL_KEYS, read_checkpoint
from course_utils.grading.pool import _death
from course_utils.grading.received import OutputLimit, Receiver
from course_utils.grading.records import Limits, Status
from course_utils.grading.scratch import remove_tree
from course_utils.grading.worker import WorkerConfig

MIB = 2**20


@pytest.fixture
def sockets():
    context = zmq.Context()
    sender, receiver = context.socket(zmq.PAIR), context.socket(zmq.PAIR)
    sender.bind("inproc://kernel")
    receiver.connect("inproc://kernel")
    yield sender, receiver
    sender.close(linger=0)
    receiver.close(linger=0)
    context.term()


def _send(session: Session, sender, buffers=(), parent="cell") -> None:
    message = session.msg("display_data", {"data": {"text/plain": "x"}, "metadata": {}},
                          parent={"header": {"msg_id": parent}})
    sender.send_multipart(session.serialize(message) + list(buffers))


def _never_waits() -> float:
    raise AssertionError("every frame was there")


def test_a_message_of_many_frames_counts_as_a_whole(sockets):
    """Checks a message of 40 frames of 256 KiB (10 MiB, each frame far under the cap) stops
    at the 4 MiB message cap before it is deserialised, while a message with one buffer
    under the cap is read with its buffer."""
    sender, receiving = sockets
    session = Session(key=b"secret")
    receiver = Receiver(Limits(max_message_mb=4), Session(key=b"secret"))
    _send(session, sender, [b"b" * 1000])
    message = receiver.read(receiving, _never_waits)
    assert [bytes(buffer) for buffer in message["buffers"]] == [b"b" * 1000]
    _send(session, sender, [memoryview(b"m" * (MIB // 4))] * 40)
    with pytest.raises(OutputLimit, match="larger than 4,194,304 bytes"):
        receiver.read(receiving, _never_waits)
    assert receiver.received.cell <= 4 * MIB + MIB // 4 + 4096  # stopped at the first frame over


def test_discarded_messages_count_against_the_cell(sockets):
    """Checks messages answering another request (the grader drops them) still count: 12
    messages of 1 MiB stop at an 8 MiB cell cap; a new cell starts from 0, the notebook not."""
    sender, receiving = sockets
    session = Session(key=b"k")
    receiver = Receiver(Limits(max_message_mb=2, max_cell_received_mb=8,
                               max_notebook_received_mb=64), Session(key=b"k"))
    with pytest.raises(OutputLimit, match="in one cell"):
        for _ in range(12):
            _send(session, sender, [b"d" * MIB], parent="someone else's")
            receiver.read(receiving, _never_waits)
    assert receiver.received.notebook > 8 * MIB
    receiver.new_cell()
    assert receiver.received.cell == 0


def test_a_checkpoint_that_expands_is_not_unfolded(tmp_path):
    """Checks a checkpoint of a few KiB whose tensors are stride-0 views of 4 M elements each
    is refused as unreadable instead of being turned into lists of numbers."""
    huge = torch.zeros(1).expand(2**22)  # one float stored, four million claimed
    buffer = io.BytesIO()
    torch.save({key: huge for key in MODEL_KEYS}, buffer)
    assert len(buffer.getvalue()) < 4096
    (tmp_path / "model.pt").write_bytes(buffer.getvalue())
    facts = read_checkpoint(tmp_path / "model.pt")
    assert (facts.kind, facts.parameters) == ("unreadable", None), facts.problem
    assert "expands" in facts.problem


def _deep_tree(top, depth: int) -> None:
    """``depth`` nested folders (paths far past PATH_MAX), made relative to open folders."""
    handle = os.open(top, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=handle)
            inner = os.open("d", os.O_RDONLY, dir_fd=handle)
            os.close(handle)
            handle = inner
        os.open(b"odd\xff\nname", os.O_CREAT | os.O_WRONLY, dir_fd=handle)
    finally:
        os.close(handle)


def test_clean_up_survives_depth_links_permissions_and_names(tmp_path):
    """Checks a scratch folder 3,000 folders deep (shutil.rmtree raises RecursionError on it),
    with a closed folder, a link out of it and an odd name, is removed entirely, and what the
    link points to is not."""
    scratch, outside = tmp_path / "scratch", tmp_path / "keep.txt"
    scratch.mkdir()
    outside.write_text("the grader's")
    _deep_tree(scratch, 3000)
    (scratch / "link").symlink_to(outside)
    (scratch / "closed").mkdir()
    (scratch / "closed" / "file").write_text("x")
    (scratch / "closed").chmod(0)
    (scratch / "x\n\x1b[2J").write_text("terminal escapes")
    with pytest.raises(RecursionError):
        shutil.rmtree(scratch)  # what the grader did before
    assert remove_tree(scratch) is None
    assert not scratch.exists()
    assert outside.read_text() == "the grader's"


def test_a_worker_that_fails_costs_its_submission_as_error():
    """Checks a worker that ends by itself (an abort at its memory cap, an exception) marks its
    submission `error` naming the cap, and one killed from outside `kernel-died`."""
    config = WorkerConfig(1, Limits(worker_memory_mb=1500), None, None, None)
    status, reason = _death(-signal.SIGABRT, config)
    assert status is Status.ERROR and "capped at 1500 MiB" in reason
    assert _death(-signal.SIGKILL, config)[0] is Status.KERNEL_DIED
