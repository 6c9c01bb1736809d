"""A check's own probe run again in a fresh process, on the answers' source alone (issue 28).

Some checks' verdicts rest on what a library reports about the answer (lesson 08: the graph
breaks ``torch._dynamo.explain`` finds). In the learner's kernel, the learner's other cells could
have patched that library first. When grading, such a check lends the grader an
:class:`~.framework.Outside` made by :func:`outside`: the kernel sends the check's observations
and the answers as source (``probe.portable_answers``), and the grader starts
``python -m course_utils.checks.clean_run`` in the grading sandbox, which imports only the
modules the answers use, runs only their source and the notebook functions they call, and calls
the check's probe there. Those observations are the verdict's. An answer that cannot be rebuilt
(it reads a global tensor, say) or whose clean run ends without a result keeps the kernel's, as
does one whose kernel observations earn nothing (a forgery can only win points).
"""
from __future__ import annotations

import importlib
import json
import sys

from .framework import Outside

RESULT = "COURSE-CLEAN-RUN "  # the prefix of the child's one result line
MAX_RESULT_BYTES = 1 << 20
TIME_LIMIT_S = 300.0  # the submission's own deadline ends it first when nearer


def outside(check_name: str) -> Outside:
    """The Outside of the check named ``check_name``: kernel observations and sources in, clean
    observations out."""
    def gather(inputs, facts, sandbox):
        from . import REGISTRY

        kernel = facts.get("kernel") if isinstance(facts, dict) else None
        # Forged observations can only win points: where the kernel's earn none, the clean run
        # (seconds of a fresh process) has nothing to take back.
        if REGISTRY[check_name].evaluate(inputs, kernel, False).fraction == 0:
            return kernel
        return rerun(check_name, facts, inputs, sandbox)
    return Outside(observed_and_portable, gather)


def observed_and_portable(*args):
    """In the kernel, from source (framework.Check.probe_expression sends the check's own probe
    beside it, as ``probe``): the check's observations, and the answers as source."""
    *answers, inputs = args
    return {"kernel": probe(*answers, inputs),  # noqa: F821 - defined in the kernel
            "portable": portable_answers(*answers)}  # noqa: F821 - the probe kit's


def rerun(check_name: str, facts, inputs, sandbox):
    """The clean process's observations; the kernel's when the answers cannot be rebuilt."""
    kernel = facts.get("kernel") if isinstance(facts, dict) else None
    portable = facts.get("portable") if isinstance(facts, dict) else None
    if not isinstance(portable, dict) or portable.get("missing") or not portable.get("names"):
        return kernel
    given = json.dumps({"check": check_name, "portable": portable, "inputs": inputs}).encode()
    with sandbox.folder() as folder:
        ran = sandbox.run([sys.executable, "-m", __name__], scratch=folder,
                          timeout=TIME_LIMIT_S, stdin=given, output_bytes=MAX_RESULT_BYTES)
    lines = [line for line in ran.stdout.splitlines() if line.startswith(RESULT)]
    try:
        result = json.loads(lines[-1][len(RESULT):]) if lines else None
    except (ValueError, RecursionError):
        result = None
    if not isinstance(result, dict) or "probe_error" in result:
        return kernel
    return result


def _rebuild(portable: dict) -> dict:
    """The answers' namespace: their modules, imported objects, constants, then their source."""
    namespace: dict = {"__name__": "__main__"}
    for name, module in portable["modules"].items():
        namespace[name] = importlib.import_module(module)
    for name, (module, qualified) in portable["objects"].items():
        value = importlib.import_module(module)
        for part in qualified.split("."):
            value = getattr(value, part)
        namespace[name] = value
    namespace.update(portable["constants"])
    for source in portable["sources"]:
        exec(compile(source, "<answer>", "exec"), namespace)  # noqa: S102 - in the sandbox
    return namespace


def main() -> None:
    from ..probe import describe_error
    from . import REGISTRY

    given = json.loads(sys.stdin.read())
    try:
        namespace = _rebuild(given["portable"])
        answers = [namespace[name] for name in given["portable"]["names"]]
        observed = REGISTRY[given["check"]].probe(*answers, given["inputs"])
    except Exception as error:  # noqa: BLE001 - the grader then keeps the kernel's observations
        observed = {"probe_error": describe_error(error)}
    print(RESULT + json.dumps(observed), flush=True)


if __name__ == "__main__":
    main()
