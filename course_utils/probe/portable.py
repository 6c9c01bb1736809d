"""The answers as source: what a fresh process needs to rebuild them (checks.clean_run).

Runs in the student's kernel, as part of the probe kit. For each answer function: its source,
the notebook functions it calls (their source too, first), the modules and imported objects it
uses under the names it uses, and its plain constants. A global it reads that is none of these
(a tensor, an instance) is listed in ``missing``: such an answer is not rebuilt, and the check
keeps what the kernel observed.
"""

import dis
import inspect
import sys
import textwrap
import types

PLAIN = (bool, int, float, str, type(None))


def _global_names(code: types.CodeType) -> set[str]:
    """The names ``code`` (and the functions nested in it) read as globals."""
    names = {ins.argval for ins in dis.get_instructions(code)
             if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and isinstance(ins.argval, str)}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _importable(value) -> tuple[str, str] | None:
    """(module, qualified name) when ``value`` can be imported again from where it was made."""
    module, name = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(name, str) or module == "__main__":
        return None
    found = sys.modules.get(module)
    for part in name.split("."):
        found = getattr(found, part, None)
    return (module, name) if found is value else None


def portable_answers(*answers) -> dict:
    """What rebuilds ``answers`` elsewhere: {"names", "sources", "modules", "objects",
    "constants", "missing"} (JSON-able)."""
    facts: dict = {"names": [], "sources": [], "modules": {}, "objects": {}, "constants": {},
                   "missing": []}
    visited: set[int] = set()

    def visit(function) -> None:
        if id(function) in visited:
            return
        visited.add(id(function))
        try:
            source = textwrap.dedent(inspect.getsource(function))
        except (OSError, TypeError):
            facts["missing"].append(getattr(function, "__name__", "an answer without source"))
            return
        for name in sorted(_global_names(function.__code__)):
            if name not in function.__globals__:
                continue  # a built-in
            value = function.__globals__[name]
            if isinstance(value, types.ModuleType):
                facts["modules"][name] = value.__name__
            elif isinstance(value, types.FunctionType) and value.__module__ == "__main__":
                visit(value)
            elif isinstance(value, PLAIN):
                facts["constants"][name] = value
            elif (where := _importable(value)) is not None:
                facts["objects"][name] = list(where)
            else:
                facts["missing"].append(name)
        facts["sources"].append(source)

    for answer in answers:
        if isinstance(answer, types.FunctionType) and answer.__closure__ is None:
            facts["names"].append(answer.__name__)
            visit(answer)
        else:
            facts["missing"].append(f"an answer that is not a plain function ({answer!r:.40})")
    return facts
