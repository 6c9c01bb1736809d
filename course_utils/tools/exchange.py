"""The course's nbgrader exchange: where release, fetch, submit and collect meet.

nbgrader's default (``/usr/local/share/nbgrader/exchange``) rarely exists and is not
writable by an instructor without root. The course sets ``c.Exchange.root`` in
``nbgrader_config.py`` to ``exchange/`` in the course folder unless ``COURSE_EXCHANGE``
names another (on a shared JupyterHub: a folder every user can reach, e.g.
``/srv/nbgrader/exchange``); ``course gradebook`` (run by ``make instructor``) creates it,
writable by every user and sticky, as nbgrader requires.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

COURSE_ID = "gpu-course"
EXCHANGE_MODE = 0o1777  # everyone writes; only owners delete (the sticky bit, as /tmp)


def exchange_root(root: Path) -> Path:
    """The exchange folder nbgrader_config.py sets (COURSE_EXCHANGE, or exchange/)."""
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(root)).load_config()
    configured = config.get("Exchange", {}).get("root")
    return Path(configured) if configured else root / "exchange"


def prepare_exchange(root: Path) -> Path:
    """Create the exchange folder (mode 1777) if missing; return it."""
    folder = exchange_root(root)
    if not folder.exists():
        folder.mkdir(parents=True)
        os.chmod(folder, EXCHANGE_MODE)
    elif not folder.is_dir():
        raise ValueError(f"The exchange {str(folder)!r} is not a folder; set COURSE_EXCHANGE "
                         "or c.Exchange.root in nbgrader_config.py.")
    elif stat.S_IMODE(folder.stat().st_mode) & 0o777 != 0o777 and os.access(folder, os.W_OK):
        os.chmod(folder, EXCHANGE_MODE)  # ours, but not writable by the students
    return folder
