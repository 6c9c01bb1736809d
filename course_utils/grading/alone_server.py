"""The alone server: where answers run again alone, in the grading sandbox (checks/clean_run.py).

``python -m course_utils.grading.alone_server [module ...]``, started by alone.py, one per
grading worker: torch, the checks and the modules named (the run's lessons' imports) loaded
once, PyTorch's decompositions warmed, before any answer runs. Then, per request line on stdin,
a fork reads the request itself (this process never holds an answer's source for a later fork
to find), works in a folder of its own and reports through a pipe; this process writes one
``clean_run.RESULT`` line per request on stdout, nothing else. After each answer every process
it left is killed (this process is their subreaper) and every file in this process's own folder
removed; no answer can trace it (not dumpable). So the next answer, maybe another student's,
starts from what the server was before the first.
"""
from __future__ import annotations

import array
import contextlib
import fcntl
import importlib
import json
import os
import select
import signal
import sys
import tempfile
import termios
import time

from ..checks import clean_run
from .scratch import descendants, remove_tree


def _answer_in_a_fork(channel: int) -> bytes:
    """Run the request waiting on stdin in a forked child (what one answer does, a patch of
    torch included, dies with it), in a folder of its own, and return what it reported, at
    most clean_run.MAX_RESULT_BYTES. The child reads the request: this process never holds an
    answer's source, so no later fork, maybe another student's, inherits it."""
    folder = tempfile.mkdtemp(prefix="answer-", dir=os.getcwd())
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own output to stderr, its result through the pipe only
        status = 1
        try:
            os.close(read_end)
            os.close(channel)
            request = _one_line(0)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # the next requests are not its own
            os.dup2(2, 1)
            os.chdir(folder)
            os.environ.update(HOME=folder, TMPDIR=folder)
            tempfile.tempdir = folder
            try:
                data = json.dumps(clean_run.observe(json.loads(request))).encode()
            except (ValueError, RecursionError) as error:  # not the grader's request
                data = _failure(type(error).__name__, "a malformed request")
            except BaseException as error:  # noqa: BLE001 - sys.exit() in an answer, say
                data = _failure(type(error).__name__, "the answer ended the run")
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(data)
            status = 0
        finally:
            os._exit(status)  # never back into the server's loop
    os.close(write_end)
    chunks, size = [], 0
    with os.fdopen(read_end, "rb") as pipe:
        while size <= clean_run.MAX_RESULT_BYTES and (chunk := pipe.read(65536)):
            chunks.append(chunk)
            size += len(chunk)
    _end_what_it_left()
    if size > clean_run.MAX_RESULT_BYTES or not chunks:
        return _failure("CleanRunFailed", "too much to report" if size
                        else "it ended without a result")
    return b"".join(chunks)


def _one_line(fd: int) -> bytes:
    """One request line from ``fd``, byte-exact: the grader sends the next only after the
    reply, so nothing past the newline is ever read."""
    chunks: list[bytes] = []
    while not chunks or not chunks[-1].endswith(b"\n"):
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _waiting(fd: int) -> int:
    """How many bytes wait to be read on ``fd`` (0 on a readable pipe: its writer closed it)."""
    count = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, count)
    return count[0]


def _failure(kind: str, why: str) -> bytes:
    return json.dumps({"probe_error": {"type": kind, "message": why}}).encode()


def _end_what_it_left() -> None:
    """Kill every process under this one (its subreaper: orphans come back to it) and remove
    every file left in its own folder (the cwd :func:`serve` made), whatever the answer made of
    it (scratch.remove_tree: no depth limit, closed folders opened), so that the next answer,
    maybe another student's, starts from what this process was before the first."""
    for _ in range(100):
        left = descendants(os.getpid())
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        time.sleep(0.001)
    else:
        raise SystemExit("processes kept coming back")  # the grader starts a fresh server
    for name in os.listdir("."):
        try:
            os.rmdir(name)  # most answers leave their folder empty
        except OSError:
            remove_tree(name)


def _harden(started_in: str) -> None:
    """Before any answer runs: no answer's process can trace this one or read its files in
    /proc (not dumpable), orphans come back to it (a subreaper), and nothing in its folder is
    on the import path (an answer could leave a module there for the next)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER, 1
    sys.path[:] = [entry for entry in sys.path if entry not in ("", started_in, os.getcwd())]


def warm_up() -> None:
    """What torch loads on first use, and the probes use (a model on the meta device runs
    PyTorch's Python decompositions: about 0.9 s of imports), loaded once here instead of in
    every fork. The course's own code, before any answer runs; on the meta device, so that no
    thread pool starts (a fork inherits none of its threads)."""
    import torch

    layer = torch.nn.Linear(2, 2, device="meta")
    layer(torch.ones(1, 2, device="meta")).sum().backward()


def serve() -> None:
    """Answer each JSON request line on stdin on stdout, in order, as one RESULT line. torch,
    the checks and the modules named as arguments (the lessons' imports) are imported once,
    before any answer runs; nothing else writes to its stdout. It works in a folder it makes
    in its working directory, and removes only what is in that folder (run by hand anywhere,
    it leaves the rest alone)."""
    started_in = os.getcwd()
    own = tempfile.mkdtemp(prefix="course-alone-", dir=started_in)
    os.chdir(own)
    try:
        _harden(started_in)
        import torch  # noqa: F401 - imported once here, inherited by every fork

        from ..checks import REGISTRY  # noqa: F401

        for module in sys.argv[1:]:  # the lessons' imports, as their kernels preload them
            with contextlib.suppress(Exception):  # the answer's own import reports it
                importlib.import_module(module)
        warm_up()
        channel = os.fdopen(os.dup(1), "wb")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        channel.write(f"{clean_run.RESULT}ready\n".encode())
        channel.flush()
        # a request waits (the fork reads it); readable with nothing waiting: the grader left
        while select.select([0], [], [])[0] and _waiting(0):
            reply = _answer_in_a_fork(channel.fileno())
            channel.write(clean_run.RESULT.encode() + reply + b"\n")
            channel.flush()
    finally:
        os.chdir(started_in)
        remove_tree(own)


if __name__ == "__main__":
    serve()
