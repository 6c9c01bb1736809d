"""Start-up of the grader's own processes: the `course grade` command and its workers.

jsonschema (which nbformat uses) imports ``rfc3987_syntax`` when it is installed, to check the
"iri" string formats; that module builds a Lark grammar when imported, which costs 1-5 s of
CPU in every process. No schema the grader validates uses those formats (nbformat's do not),
so the grader's processes do without it. Never called in a learner's kernel.
"""
from __future__ import annotations

import sys

SLOW_OPTIONAL_MODULES = ("rfc3987_syntax",)


def skip_slow_optional_imports() -> None:
    """Make the optional modules above unimportable in this process (before nbformat loads)."""
    for name in SLOW_OPTIONAL_MODULES:
        sys.modules.setdefault(name, None)  # None: `import name` raises ImportError
