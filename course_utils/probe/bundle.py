"""The probe kit as one program: the text the grader sends to the student's kernel.

A probe runs in the student's kernel, where this package may not be importable the way it is
here, so the kit travels as source. Its modules are joined in dependency order and their
imports of one another (single-line ``from .x import a, b``, the only form allowed in this
package) are dropped: joined, the names are simply defined earlier in the same program.
"""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path

# Dependency order: each module uses only names defined by the ones before it.
MODULES = ("facts", "syncs", "instruments", "models", "collectives", "structures",
           "simulated_machine", "simulated_clock", "portable")

_SIBLING_IMPORT = re.compile(r"^from \.\w+ import [\w, ]+$")


# What sending the answers as source needs (checks/clean_run.py's portable_of): compiling the
# whole kit takes about 10 ms a call, this part a fraction of it.
PORTABLE = ("facts", "portable")


@cache
def source(modules: tuple[str, ...] = MODULES) -> str:
    """The kit's source (or the part of it in ``modules``, which must include what they use),
    self-contained, ready to ``exec`` ahead of a probe."""
    folder = Path(__file__).parent
    parts = []
    for name in modules:
        lines = (folder / f"{name}.py").read_text(encoding="utf-8").splitlines()
        parts.append("\n".join(line for line in lines if not _SIBLING_IMPORT.match(line)))
    return "\n\n\n".join(parts) + "\n"
