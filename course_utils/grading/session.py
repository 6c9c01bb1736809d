"""A student's kernel, with timeouts that hold against code that ignores SIGINT."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty

from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager

KERNEL_NAME = "course-grader"


class KernelDied(RuntimeError):
    """The kernel stopped answering or exited."""


class CellTimeout(RuntimeError):
    """A cell ran past its time limit; the kernel has been killed."""


class OutputLimit(RuntimeError):
    """A cell printed more than the output cap; the kernel has been killed."""


@dataclass
class Limits:
    """Bounds on one submission's run (seconds, MiB, bytes)."""

    cell_timeout: float = 30.0
    submission_timeout: float = 120.0
    memory_mb: int = 4096
    output_bytes: int = 1_000_000
    startup_timeout: float = 60.0
    hide: list = field(default_factory=list)  # folders the kernel must not see
    namespace_prefix: list = field(default_factory=list)  # from unshare_prefix()


@dataclass
class CellRun:
    """What one executed cell produced."""

    status: str  # "ok" or "error"
    outputs: list = field(default_factory=list)
    error: str = ""


def unshare_prefix() -> list[str]:
    """The command that gives the kernel a private mount namespace, or [] where none can be had."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return []
    candidates = [["unshare", "--mount", "--propagation", "private"]]
    if os.geteuid() != 0:
        candidates = [["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]]
    with tempfile.TemporaryDirectory() as folder:
        for prefix in candidates:
            probe = [*prefix, "mount", "-t", "tmpfs", "-o", "size=1m", "none", folder]
            if subprocess.run(probe, capture_output=True).returncode == 0:
                return prefix
    return []


def _write_kernelspec(folder: Path, limits: "Limits") -> Path:
    spec_dir = folder / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    hidden = [str(Path(path)) for path in limits.hide if Path(path).is_dir()]
    prefix = limits.namespace_prefix if hidden else []
    argv = [*prefix, sys.executable, "-m", "course_utils.grading.kernel",
            "--memory-mb", str(limits.memory_mb)]
    for path in hidden if prefix else []:
        argv += ["--hide", path]
    argv += ["-f", "{connection_file}"]
    (spec_dir / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": "course grader", "language": "python"}))
    return folder / "kernels"


class KernelSession:
    """Run cells and probes in a fresh, limited kernel whose working folder is ``workdir``."""

    def __init__(self, workdir: Path, limits: Limits, deadline: float):
        self.workdir = Path(workdir)
        self.limits = limits
        self.deadline = deadline
        self._spec_root = tempfile.TemporaryDirectory(prefix="course-kernelspec-")
        kernels = _write_kernelspec(Path(self._spec_root.name), limits)
        self.manager = KernelManager(
            kernel_name=KERNEL_NAME, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]))
        self.client = None
        self.pid: int | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self, env: dict[str, str]) -> None:
        # The kernel's own stderr (ipykernel's start-up chatter) is not the student's output,
        # which travels over the iopub channel.
        self.manager.start_kernel(cwd=str(self.workdir), env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        self.pid = self.manager.provisioner.pid if self.manager.provisioner else None
        self.client = self.manager.client()
        self.client.start_channels()
        try:
            self.client.wait_for_ready(timeout=self._budget(self.limits.startup_timeout))
        except RuntimeError as error:
            self.kill()
            raise KernelDied(f"the kernel did not start: {error}") from None

    def kill(self) -> None:
        """Kill the kernel's whole process group, whatever it does with signals."""
        if self.client is not None:
            self.client.stop_channels()
        if self.pid:
            try:
                os.killpg(self.pid, signal.SIGKILL)  # the kernel leads its own session
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.manager.shutdown_kernel(now=True)
        except Exception:  # noqa: BLE001 - already dead is fine
            pass
        self._spec_root.cleanup()

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
        outputs: list = []
        size = 0
        msg_id = self.client.execute(code, store_history=False, allow_stdin=False,
                                     user_expressions=user_expressions or {})
        end = time.monotonic() + timeout
        idle = False
        while not idle:
            msg = self._next(self.client.get_iopub_msg, end)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind = msg["msg_type"]
            if kind == "status" and msg["content"]["execution_state"] == "idle":
                idle = True
            elif kind in ("stream", "execute_result", "display_data", "error"):
                size += len(json.dumps(msg["content"]))
                if size > self.limits.output_bytes:
                    self.kill()
                    raise OutputLimit(
                        f"the cell printed more than {self.limits.output_bytes:,} bytes")
                outputs.append(_as_output(kind, msg["content"]))
        while True:
            reply = self._next(self.client.get_shell_msg, end)
            if reply["parent_header"].get("msg_id") == msg_id:
                return reply["content"], outputs

    def _next(self, get, end: float) -> dict:
        """The next message from a channel, or a timeout / death verdict."""
        while True:
            remaining = end - time.monotonic()
            if remaining <= 0:
                self._on_timeout()
            if not self.alive():
                raise KernelDied("the kernel died (it exited or was killed, e.g. out of memory)")
            try:
                return get(timeout=min(remaining, 0.2))
            except Empty:
                continue

    def _on_timeout(self):
        # Interrupt first (a polite loop stops), then kill: a SIGINT-proof loop cannot outlive us.
        try:
            self.manager.interrupt_kernel()
        except Exception:  # noqa: BLE001
            pass
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


class ProbeUnavailable(RuntimeError):
    """The probe could not run in the kernel (its answer names are undefined, say)."""


def _as_output(kind: str, content: dict) -> dict:
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
