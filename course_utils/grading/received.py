"""Every byte a kernel sends the grader, counted before it is held: messages read frame by frame.

ZeroMQ's size cap (``MAXMSGSIZE``) bounds one *frame*; a Jupyter message is any number of
frames (its header, content and binary buffers), so a message of many frames of 2 MiB each
passed it whole. :class:`Receiver` reads a message one frame at a time and adds each frame to
three counts, the message's, the cell's and the notebook's, stopping (:class:`OutputLimit`)
as soon as one is over its cap (``Limits.max_message_mb``, ``max_cell_received_mb``,
``max_notebook_received_mb``). Every message counts, whatever it is and whoever it answers:
those the grader discards (another request's, a status, a comm message) too.

The worker process still holds what ZeroMQ's I/O thread has read ahead of it; its own memory
cap (worker.py, ``Limits.worker_memory_mb``) bounds that, and costs one submission if it is
reached.
"""
from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

import zmq
from jupyter_client.session import Session

from .records import Limits

MIB = 2**20


class OutputLimit(RuntimeError):
    """A cell printed or sent more than a cap allows; the kernel has been killed."""


@dataclass
class Received:
    """Bytes received from one kernel: in the current cell, and since the notebook began."""

    cell: int = 0
    notebook: int = 0


class Receiver:
    """Reads whole Jupyter messages from a kernel's sockets, counting every frame first."""

    def __init__(self, limits: Limits, session: Session):
        self.session = session
        self.per_message = int(limits.max_message_mb * MIB)
        self.per_cell = int(limits.max_cell_received_mb * MIB)
        self.per_notebook = int(limits.max_notebook_received_mb * MIB)
        self.received = Received()

    def new_cell(self) -> None:
        self.received.cell = 0

    def read(self, socket: zmq.Socket, wait: Callable[[], float]) -> dict:
        """The next message on ``socket`` (one frame is ready), deserialised once every frame
        is counted. ``wait()`` is called while a later frame is not there yet: it raises when
        the cell's time is up or the kernel is gone, else says how long to wait (seconds)."""
        frames: list[bytes] = []
        size = 0
        while True:
            if not socket.poll(0):
                while not socket.poll(int(1000 * wait())):
                    pass
            frame = socket.recv(zmq.NOBLOCK)
            size += len(frame)
            self._count(len(frame), size)
            frames.append(frame)
            if not socket.getsockopt(zmq.RCVMORE):
                break
        _, message = self.session.feed_identities(frames)
        return self.session.deserialize(message)

    def _count(self, frame: int, message: int) -> None:
        self.received.cell += frame
        self.received.notebook += frame
        if message > self.per_message:
            raise OutputLimit(f"the kernel sent a message larger than {self.per_message:,} "
                              "bytes (content and buffers)")
        if self.received.cell > self.per_cell:
            raise OutputLimit(f"the kernel sent more than {self.per_cell:,} bytes in one cell "
                              "(every message counted)")
        if self.received.notebook > self.per_notebook:
            raise OutputLimit(f"the kernel sent more than {self.per_notebook:,} bytes in all "
                              "(every message counted)")


def as_output(kind: str, content: dict) -> dict:
    if kind == "stream":
        return {"output_type": "stream", "name": content["name"], "text": content["text"]}
    if kind == "error":
        return {"output_type": "error", "ename": content["ename"], "evalue": content["evalue"],
                "traceback": content["traceback"]}
    output = {"output_type": kind, "data": content.get("data", {}),
              "metadata": content.get("metadata", {})}
    if kind == "execute_result":
        output["execution_count"] = content.get("execution_count")
    return output


def literal_string(text: str) -> str:
    """The string whose repr the kernel sent back (never evaluated as code)."""
    value = ast.literal_eval(text)
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value
