"""A student's kernel: started early, sandboxed, with timeouts that hold against any code.

A :class:`KernelSession` is *started* (a process is spawned; it imports the lessons' modules
on its own) long before it is *used*: the grader keeps one spare per worker while the
current submission runs. The kernel talks to the grader over Unix sockets in its own folder
(``ipc`` transport): inside the sandbox it has no network, not even the host's loopback.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty

import zmq
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

from . import cgroups
from .confinement import Confinement, bwrap_argv
from .fairtime import cpu_times, starved_seconds
from .groups import Group, launch_argv
from .limited import UNPRIVILEGED
from .received import OutputLimit, Receiver, as_output
from .records import Limits

KERNEL_NAME = "course-grader"
# A cell's (and the submission's) time limit is extended by the wall time the sandbox lost
# waiting for a CPU while it got less than its share (fairtime.starved_seconds), up to this
# many cell limits per notebook: a neighbour's load, or the machine's, is not the student's.
MAX_WAIT_SHARE = 2.0


class KernelDied(RuntimeError):
    """The kernel stopped answering or exited."""


class CellTimeout(RuntimeError):
    """A cell ran past its time limit; the kernel has been killed."""


class ProbeUnavailable(RuntimeError):
    """The probe could not run in the kernel (its answer names are undefined, say)."""


@dataclass
class CellRun:
    """What one executed cell produced."""

    status: str  # "ok" or "error"
    outputs: list = field(default_factory=list)
    error: str = ""


@dataclass(frozen=True)
class KernelRecipe:
    """How every kernel of a run is started (the same for every student)."""

    limits: Limits
    env: dict[str, str]
    preload: dict[str, tuple[str, ...]] = field(default_factory=dict)  # lesson -> its imports
    bwrap: str | None = None        # None: no sandbox (--unsafe-no-sandbox)
    syscall_filter: bool = False    # kernel.py installs limited.py's (sandbox.Isolation says)
    hidden: tuple[Path, ...] = ()   # folders the kernel must see empty
    control: cgroups.ResourceControl = cgroups.UNSAFE  # whole-sandbox limits (cgroups.py)
    group: str = ""                 # the run's cgroup, relative to control's roots
    cpu_share: float = 1.0          # cores each worker's sandboxes are guaranteed together

    @property
    def user(self) -> int:
        """The uid student code runs as: unprivileged when the grader is root and sandboxed."""
        return UNPRIVILEGED if self.bwrap and os.geteuid() == 0 else -1

    @property
    def worker_group(self) -> str:
        """This worker's group inside the run's (relative to control's roots): its kernels'
        groups and those of the sandboxes its checks borrow (outside.py) are made in it, so
        that the run's end removes them, and all they hold, even after the worker is killed."""
        return f"{self.group}/w{os.getpid()}"


def kernel_command(recipe: KernelRecipe, lesson: str | None) -> list[str]:
    # kernel.py parses the launcher's options (limited.py) and applies them itself.
    argv = [sys.executable, "-m", "course_utils.grading.kernel", *recipe.limits.launcher_options(),
            "--user", str(recipe.user), *["--syscall-filter"] * recipe.syscall_filter]
    for module in recipe.preload.get(lesson, ()):
        argv += ["--preload", module]
    # No history database (a file per kernel, of no use). Plain tracebacks (file, line,
    # function): IPython's default spends seconds formatting a deep torch traceback.
    return [*argv, "--HistoryManager.enabled=False", "--InteractiveShell.xmode=Plain",
            "-f", "{connection_file}"]


class KernelSession:
    """One kernel in its own folder: ``<folder>/home`` (HOME, cwd) and ``<folder>/ipc``.

    ``lesson`` only chooses which modules it imports ahead (any kernel can grade any lesson).
    """

    def __init__(self, folder: Path, recipe: KernelRecipe, lesson: str | None = None):
        self.folder = Path(folder)
        self.home = self.folder / "home"
        self.ipc = self.folder / "ipc"
        for path in (self.home, self.ipc, self.folder / "spec" / KERNEL_NAME):
            path.mkdir(parents=True)
        self.limits = recipe.limits
        self.lesson = lesson
        self.deadline = float("inf")
        command = kernel_command(recipe, lesson)
        if recipe.bwrap:
            confinement = Confinement(self.home, hidden=recipe.hidden, writable=(self.ipc,),
                                      scratch_mb=recipe.limits.scratch_mb)
            command = bwrap_argv(command, confinement, bwrap=recipe.bwrap,
                                 switch_user=recipe.user >= 0)
        # Its own cgroup, inside its worker's (which holds the worker's CPU share), so that
        # the spares a worker starts share that worker's CPU instead of taking more. Both are
        # made only inside the run's group (FileNotFoundError once the run has removed it):
        # a kernel started late must not make the run's group again, outliving the run.
        self.group: Group | None = None
        if recipe.control.enforced:
            slot = Group(recipe.control, recipe.worker_group).ensure()
            self.group = Group(recipe.control, f"{slot.name}/{self.folder.name}")
            self.group.create(recipe.limits, parents=False)
        command = launch_argv(self.group, recipe.limits, command)
        self.user = recipe.user
        # "message": the kernel interrupts itself, since from outside its session it cannot
        # be reached by a process-group signal.
        (self.folder / "spec" / KERNEL_NAME / "kernel.json").write_text(json.dumps(
            {"argv": command, "display_name": "course grader", "language": "python",
             "interrupt_mode": "message"}))
        self.manager = KernelManager(
            kernel_name=KERNEL_NAME,
            kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(self.folder / "spec")]),
            transport="ipc", ip=str(self.ipc / "k"),
            connection_file=str(self.ipc / "connection.json"))
        self.client = None
        self._monitors: list = []
        self._receiver: Receiver | None = None
        self.total_output = 0  # bytes of output of every cell so far
        self._refused = ""
        self.pid: int | None = None
        self._env = dict(recipe.env, HOME=str(self.home))
        self.waited = 0.0  # seconds added to its limits: time lost waiting for a core
        self._cpu_before: dict[int, tuple[int, int]] = {}
        self._cell_started = 0.0
        self._cpu_share = recipe.cpu_share
        self._cell_limit = 0.0
        self._end = 0.0  # when the running cell's time is up

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Spawn the kernel and return at once: it loads in the background."""
        # The kernel's own stderr (ipykernel's start-up chatter) is not the student's output,
        # which travels over the iopub channel.
        if self.user >= 0:  # the kernel's user must read its connection file, write its folders
            self.manager.write_connection_file()
            for path in (self.home, self.ipc, Path(self.manager.connection_file)):
                os.chown(path, self.user, self.user)
        self.manager.start_kernel(cwd=str(self.home), env=self._env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        self.pid = self.manager.provisioner.pid if self.manager.provisioner else None

    def begin(self, deadline: float) -> None:
        """Wait until the kernel answers; from now on ``deadline`` bounds everything."""
        self.deadline = deadline
        # A frame larger than a whole message may be (a 1 GB error message, say) is refused
        # by ZeroMQ before it is read into this process: the kernel is disconnected, which
        # the monitors below report, and the cell ends as `output-limit`. Messages of many
        # frames are counted as they are read (received.py).
        self.manager.context.setsockopt(zmq.MAXMSGSIZE, self._largest_message())
        self.client = self.manager.client()
        self.client.start_channels()
        self._receiver = Receiver(self.limits, self.client.session)
        self._monitors = [channel.socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)
                          for channel in (self.client.iopub_channel, self.client.shell_channel)]
        self._handshake(time.monotonic() + self._budget(self.limits.startup_timeout))

    def _handshake(self, end: float) -> None:
        """kernel_info answered on shell, and IOPub delivering: a cell's output sent before
        IOPub is connected would be lost. (jupyter_client's wait_for_ready checks the same,
        but spends 0.2 s on a kernel that is long ready: a spare.)"""
        replied = published = False
        msg_id, asked = self.client.kernel_info(), time.monotonic()
        while not (replied and published):
            if not self.alive():
                self.kill()
                raise KernelDied("the kernel did not start: it exited")
            if time.monotonic() > end:
                self.kill()
                raise KernelDied("the kernel did not start in time")
            if not replied:
                try:
                    reply = self.client.get_shell_msg(timeout=0.05)
                    replied = reply["parent_header"].get("msg_id") == msg_id
                except Empty:
                    pass
            if not published:
                try:
                    self.client.get_iopub_msg(timeout=0.05)
                    published = True
                except Empty:
                    if replied and time.monotonic() - asked > 0.5:
                        # Its busy/idle went out before IOPub connected: ask again.
                        msg_id, asked, replied = self.client.kernel_info(), time.monotonic(), False

    def _largest_message(self) -> int:  # bytes: Limits.max_message_mb
        return int(self.limits.max_message_mb * 2**20)

    def _oversized(self) -> bool:
        """Whether ZeroMQ dropped the kernel for a message over the size cap."""
        return any(monitor.poll(0) for monitor in self._monitors)

    def kill(self) -> None:
        """Kill the kernel and everything it started, whatever it does with signals."""
        for monitor in self._monitors:
            with contextlib.suppress(Exception):
                monitor.close(linger=0)
        self._monitors = []
        if self.client is not None:
            self.client.stop_channels()
        if self.pid:
            try:
                # The kernel (or its sandbox, whose death ends its PID namespace) leads its
                # own process group.
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        with contextlib.suppress(Exception):  # already dead is fine
            self.manager.shutdown_kernel(now=True)
        if self.group is not None:  # whatever escaped the process group (nothing should)
            self._refused = self.refusals()  # read before the group goes
            self.group.remove()
            self.group = None

    def refusals(self) -> str:
        """What its cgroup's limits refused (memory, processes), in words; '' if nothing."""
        return self.group.counters().describe() if self.group is not None else self._refused

    def alive(self) -> bool:
        return self.manager.is_alive()

    def _budget(self, wanted: float) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise CellTimeout("the whole-submission time limit was reached")
        return min(wanted, left)

    # ------------------------------------------------------------------ execution
    def _execute(self, code: str, user_expressions: dict | None = None) -> tuple[dict, list]:
        timeout = self._budget(self.limits.cell_timeout)
        self._cell_limit = timeout
        if self.group is not None:  # time lost to other sandboxes counts from here
            self._cpu_before = cpu_times(self.group.threads())
            self._cell_started = time.monotonic()
        outputs: list = []
        size = 0
        assert self._receiver is not None, "begin() first"
        self._receiver.new_cell()
        msg_id = self.client.execute(code, store_history=False, allow_stdin=False,
                                     user_expressions=user_expressions or {})
        self._end = time.monotonic() + timeout
        # Until both the reply and the idle status have come, and then while anything is
        # still queued: a kernel that says it is idle early (or replies early) does not stop
        # the reading while it floods; every message counts against the caps.
        idle, reply, draining = False, None, False
        while True:
            if idle and reply is not None:
                draining = True
            channel, msg = self._next(draining)
            if msg is None:
                return reply, outputs
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if channel == "shell":
                reply = msg["content"]
            elif kind == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
            elif kind in ("stream", "execute_result", "display_data", "error"):
                length = len(json.dumps(msg["content"])) + sum(map(len, msg["buffers"]))
                size += length
                self.total_output += length
                if size > self.limits.output_bytes:
                    self.kill()
                    raise OutputLimit(
                        f"the cell printed more than {self.limits.output_bytes:,} bytes")
                if self.total_output > self.limits.total_output_bytes:
                    self.kill()
                    raise OutputLimit(f"the notebook printed more than "
                                      f"{self.limits.total_output_bytes:,} bytes in all")
                outputs.append(as_output(kind, msg["content"]))

    def _next(self, draining: bool) -> tuple[str, dict | None]:
        """The next message from IOPub (first) or shell, read whole by the receiver, or a
        timeout / death verdict; (``""``, None) when ``draining`` and IOPub has nothing."""
        channels = {"iopub": self.client.iopub_channel.socket,
                    "shell": self.client.shell_channel.socket}
        poller = zmq.Poller()
        for socket in channels.values():
            poller.register(socket, zmq.POLLIN)
        while True:
            ready = dict(poller.poll(0 if draining else int(self._wait() * 1000)))
            for name, socket in channels.items():
                if socket in ready and not (draining and name == "shell"):
                    try:
                        return name, self._receiver.read(socket, self._wait)
                    except OutputLimit:
                        self.kill()
                        raise
            if draining:
                return "", None

    def _wait(self) -> float:
        """How long to wait for the next frame (at most 0.2 s), or a timeout / death verdict."""
        remaining = self._end - time.monotonic()
        if remaining <= 0:
            self._end += self._starvation()
            remaining = self._end - time.monotonic()
        if remaining <= 0:
            self._on_timeout()
        if not self.alive():
            raise KernelDied("the kernel died (it exited or was killed, e.g. out of memory)")
        if self._oversized():
            self._raise_if_it_exits(within=1.0)  # then it was no refused message
            self.kill()
            raise OutputLimit(f"the kernel sent more than the grader takes (a frame over "
                              f"{self._largest_message():,} bytes, or its worker's memory cap)")
        return min(remaining, 0.2)

    def _raise_if_it_exits(self, within: float) -> None:
        """KernelDied if the kernel is gone within ``within`` seconds: a kernel that exits closes
        its sockets too, which the monitors report as they report a message ZeroMQ refused."""
        end = time.monotonic() + within
        while time.monotonic() < end:
            if not self.alive():
                raise KernelDied("the kernel died (it exited or was killed, e.g. out of memory)")
            time.sleep(0.05)

    def _starvation(self) -> float:
        """Seconds to add to a limit that has run out: the wall time the sandbox lost to
        others since the cell started (fairtime.starved_seconds), less what was added
        already, at most MAX_WAIT_SHARE of the cell limit per notebook in all. A neighbour's
        load is not the student's time."""
        if self.group is None:
            return 0.0
        now = time.monotonic()
        lost = starved_seconds(self._cpu_before, cpu_times(self.group.threads()),
                               now - self._cell_started, self._cpu_share)
        lost_in_cell = lost - self._added_in_cell()
        allowed = MAX_WAIT_SHARE * self.limits.cell_timeout - self.waited
        added = min(lost_in_cell, max(0.0, allowed))
        if added > 0.05:
            self.waited += added
            self.deadline += added
            return added
        return 0.0

    def _added_in_cell(self) -> float:
        """What earlier extensions already added to this cell's limit."""
        return max(0.0, self._end - self._cell_started - self._cell_limit)

    def _on_timeout(self):
        # Interrupt first (a polite loop stops), then kill: a SIGINT-proof loop cannot outlive us.
        with contextlib.suppress(Exception):  # a dead kernel needs no interrupt
            self.manager.interrupt_kernel()
        time.sleep(0.5)
        self.kill()
        raise CellTimeout("a cell ran past its time limit")

    def run_cell(self, code: str) -> CellRun:
        content, outputs = self._execute(code)
        if content.get("status") == "ok":
            return CellRun("ok", outputs)
        error = f"{content.get('ename', 'Error')}: {content.get('evalue', '')}"
        return CellRun("error", outputs, error)

    def evaluate(self, expression: str) -> str:
        """Evaluate one expression in the user namespace and return its ``repr`` text.

        User expressions bypass IPython's input transformers, which student code may
        have registered to rewrite whatever the grader sends.
        """
        content, _ = self._execute("", user_expressions={"value": expression})
        result = content.get("user_expressions", {}).get("value")
        if content.get("status") != "ok" or not result:
            raise KernelDied("the kernel did not evaluate the grader's probe") \
                if not self.alive() else ProbeUnavailable(
                    f"the kernel refused the grader's probe ({content.get('ename', 'no reply')})")
        if result.get("status") != "ok":
            raise ProbeUnavailable(f"{result.get('ename')}: {result.get('evalue')}")
        return result["data"]["text/plain"]

