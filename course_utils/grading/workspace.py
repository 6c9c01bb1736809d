"""Where a run writes, checked before any work, and its scratch space, never left behind.

A scheduler ends a task with SIGTERM (Slurm's ``scancel``, a pod's deletion), then SIGKILL:
:func:`terminate_as_exit` turns the first into ``SystemExit`` so that the run's ``finally``
blocks remove its scratch folder and control group. What SIGKILL leaves (no handler runs),
the next run on that machine removes: every scratch folder carries its owner's host and
process id (:data:`OWNER_FILE`), and :func:`make_scratch` deletes those whose owner is gone.
"""
from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from .scratch import remove_tree

SCRATCH_PREFIX = "course-grade-"
OWNER_FILE = "owner.json"
TERMINATED_EXIT = 128 + signal.SIGTERM


def require_writable(folder: Path, option: str = "--out") -> None:
    """ValueError in one line when ``folder`` cannot be made or written by this user."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    target = folder if folder.exists() else existing
    if not target.is_dir() or not os.access(target, os.W_OK | os.X_OK):
        user = pwd.getpwuid(os.geteuid()).pw_name
        what = "is not a folder" if not target.is_dir() else f"is not writable by {user}"
        raise ValueError(f"{option} {str(folder)!r}: {str(target)!r} {what}; choose a folder "
                         f"this user can write, or make it writable (chown/chmod) first.")


def owner_alive(owner: dict) -> bool:
    """Whether the process that made a scratch folder still runs (on this host; elsewhere,
    or when unsure, it counts as alive: only a folder surely abandoned is removed)."""
    if owner.get("host") != socket.gethostname() or not isinstance(owner.get("pid"), int):
        return True
    try:
        os.kill(owner["pid"], 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_abandoned(parent: Path) -> list[Path]:
    """Remove this user's scratch folders under ``parent`` whose owner process is gone."""
    removed = []
    for folder in parent.glob(f"{SCRATCH_PREFIX}*"):
        try:
            if folder.stat().st_uid != os.geteuid():
                continue
            owner = json.loads((folder / OWNER_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # not ours, or made by a run that kept no owner file: left alone
        if isinstance(owner, dict) and not owner_alive(owner):
            remove_tree(folder)  # a killed submission's tree: any depth, links, modes
            removed.append(folder)
    return removed


def make_scratch() -> Path:
    """A new scratch folder for this run, after removing those that killed runs left."""
    parent = Path(tempfile.gettempdir())
    remove_abandoned(parent)
    folder = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=parent))
    (folder / OWNER_FILE).write_text(
        json.dumps({"host": socket.gethostname(), "pid": os.getpid()}), encoding="utf-8")
    return folder


def _exit_on_term(signum, frame) -> None:
    raise SystemExit(TERMINATED_EXIT)


@contextlib.contextmanager
def terminate_as_exit() -> Iterator[None]:
    """While inside, SIGTERM raises SystemExit(143): ``finally`` blocks clean up."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _exit_on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
