"""Every check's probe run again alone, in a fresh process, on the answers' source (issue 28).

A probe observes the answer inside the learner's kernel, where the learner's other cells could
have patched what it calls first (``torch._dynamo.explain``, a clock, the course's own
helpers). So when grading (grading/check_api.py says when), the kernel sends the answers as
source (:func:`portable_of`, ``probe.portable_answers``) and the grader hands them to a process
no notebook ever touched (grading/alone_server.py, a fork per answer), which calls
:func:`observe`: it imports only the modules the answers use, runs only their source and the
notebook functions and classes they use, and calls the check's probe. The protocol's prefix
and bound are declared here, once, for both sides.
"""
from __future__ import annotations

import importlib

RESULT = "COURSE-CLEAN-RUN "  # the prefix of the alone server's result lines
MAX_RESULT_BYTES = 1 << 20


def portable_of(*args):
    """In the kernel, from source (framework.Check.probe_expression): the answers as source,
    or why they cannot be sent."""
    *answers, _inputs = args
    try:
        return portable_answers(*answers)  # noqa: F821 - the probe kit's
    except Exception as error:  # noqa: BLE001 - an answer no process can rebuild
        return {"names": [], "missing": [f"an answer that raised {type(error).__name__}"]}


def _rebuild(portable: dict) -> dict:
    """The answers' namespace: their modules, imported objects, constants and devices, then
    their source."""
    namespace: dict = {"__name__": "__main__"}
    for name, module in portable["modules"].items():
        namespace[name] = importlib.import_module(module)
    for name, (module, qualified) in portable["objects"].items():
        value = importlib.import_module(module)
        for part in qualified.split("."):
            value = getattr(value, part)
        namespace[name] = value
    namespace.update(portable["constants"])
    if portable.get("devices"):
        import torch

        namespace.update({name: torch.device(where)
                          for name, where in portable["devices"].items()})
    for source in portable["sources"]:
        exec(compile(source, "<answer>", "exec"), namespace)  # noqa: S102 - in the sandbox
    return namespace


def observe(request: dict) -> dict:
    """One request's observations: the answers rebuilt, the check's probe called on them."""
    from ..probe import describe_error
    from . import REGISTRY

    try:
        namespace = _rebuild(request["portable"])
        answers = [namespace[name] for name in request["portable"]["names"]]
        return REGISTRY[request["check"]].probe(*answers, request["inputs"])
    except Exception as error:  # noqa: BLE001 - the grader then keeps the kernel's observations
        return {"probe_error": describe_error(error)}
