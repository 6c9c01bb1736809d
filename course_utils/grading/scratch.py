"""Removing what a submission left behind, whatever it left: clean-up that cannot fail.

A kernel's folder may hold a tree thousands of folders deep (``shutil.rmtree`` recurses and
raised ``RecursionError``, which ``ignore_errors`` does not cover, and lost a whole run's
tables), paths longer than PATH_MAX, folders without write or search permission, symbolic
links anywhere, names in any bytes. ``rm -rf`` (fts: no recursion limit, relative paths, never
follows links, stays on one file system) removes all of that; a folder it cannot enter is
opened up (``chmod -R u+rwx``) and removed again. Nothing here raises: what is left is
returned, for the run to report.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

TIMEOUT_S = 120.0  # per attempt: millions of files are removed well within it


def remove_tree(path: Path | str) -> Path | None:
    """Remove ``path`` and everything under it; None when it is gone, else the path left."""
    path = Path(path)
    for attempt in range(2):
        if not path.exists() and not path.is_symlink():
            return None
        if attempt:  # folders it could not enter or empty: open them up (never follows links)
            _run(["chmod", "-R", "u+rwx", "--", str(path)])
        _run(["rm", "-rf", "--one-file-system", "--", str(path)])
    return None if not path.exists() and not path.is_symlink() else path


def _run(argv: list[str]) -> None:
    if shutil.which(argv[0]) is None:
        return
    try:
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        pass


def filled(leader: int | None, folder: Path, capacity_mb: int) -> bool:
    """Whether the size-limited tmpfs at ``folder`` in the sandbox that ``leader`` (bwrap)
    started is full: read from outside, through a sandboxed process's ``/proc/PID/root``,
    never the kernel's word. False where there is no such tmpfs (no sandbox, no cap)."""
    if not leader or capacity_mb <= 0:
        return False
    for pid in descendants(leader):
        try:
            info = os.statvfs(f"/proc/{pid}/root{folder}")
        except OSError:
            continue
        if info.f_blocks * info.f_frsize <= (capacity_mb + 1) * 2**20:  # the tmpfs, not the host's
            return info.f_bavail * info.f_frsize < 2**20
    return False


def descendants(leader: int) -> list[int]:
    """The processes below ``leader``, nearest first."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(name))
    found, queue = [], list(children.get(leader, []))
    while queue:
        pid = queue.pop(0)
        found.append(pid)
        queue += children.get(pid, [])
    return found
