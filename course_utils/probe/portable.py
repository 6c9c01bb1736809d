"""The answers as source: what a fresh process needs to rebuild them (checks.clean_run).

Runs in the student's kernel, as part of the probe kit. For each answer function or class: its
source, the notebook functions and classes it uses (their source too, first), the modules and
imported objects it uses under the names it uses, its plain constants (numbers, strings, lists
and dicts of them) and its torch devices and dtypes; an answer that is plain data (a dict of
flags, say) travels as its value. A global it reads that is none of these (a tensor, an
instance) is listed in ``missing``: such an answer is not rebuilt, and the check keeps what the
kernel observed.
"""

import ast
import dis
import inspect
import json
import linecache
import sys
import textwrap
import types

PLAIN = (bool, int, float, str, type(None))
MAX_DATA_CHARS = 100_000  # an answer sent as its value (JSON), at most


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


def _class_source(cls: type) -> tuple[str, set[str], dict]:
    """A notebook class's statement (read from its cell, as a function's is), the names its
    statement reads, and the globals its methods see."""
    methods = [value for value in vars(cls).values() if isinstance(value, types.FunctionType)]
    if not methods:
        raise TypeError("a class without methods")
    code = methods[0].__code__
    lines = linecache.getlines(code.co_filename)
    for node in ast.walk(ast.parse("".join(lines))):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__ \
                and node.lineno <= code.co_firstlineno <= (node.end_lineno or 0):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            source = textwrap.dedent("".join(lines[first - 1:node.end_lineno]))
            return source, names, methods[0].__globals__
    raise OSError(f"the source of class {cls.__name__}")


def _plain_data(value) -> bool:
    """JSON that comes back as it was (dicts with string keys, lists, plain values)."""
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return False
    return len(text) <= MAX_DATA_CHARS and json.loads(text) == value \
        and not isinstance(value, tuple)


def _place(name: str, value, facts: dict, visit) -> None:
    """Where a global an answer reads goes in ``facts`` (its own source first, by ``visit``)."""
    if isinstance(value, types.ModuleType):
        facts["modules"][name] = value.__name__
    elif isinstance(value, types.FunctionType | type) and value.__module__ == "__main__":
        visit(value)
    elif isinstance(value, PLAIN) or _plain_data(value):  # a list of labels, a dict of sizes
        facts["constants"][name] = value
    elif (where := _importable(value) or _torch_dtype(value)) is not None:
        facts["objects"][name] = list(where)
    elif type(value).__module__ == "torch" and type(value).__name__ == "device":
        facts["devices"][name] = str(value)  # `device = pick_device()`, as the lessons write
    else:
        facts["missing"].append(name)


def _torch_dtype(value) -> tuple[str, str] | None:
    """("torch", "float16") for ``torch.float16``: a dtype is an attribute of torch."""
    if type(value).__module__ != "torch" or type(value).__name__ != "dtype":
        return None
    name = str(value).removeprefix("torch.")
    return ("torch", name) if getattr(sys.modules.get("torch"), name, None) is value else None


def portable_answers(*answers) -> dict:
    """What rebuilds ``answers`` elsewhere: {"names", "sources", "modules", "objects",
    "constants", "devices", "missing"} (JSON-able)."""
    facts: dict = {"names": [], "sources": [], "modules": {}, "objects": {}, "constants": {},
                   "devices": {}, "missing": []}
    visited: set[int] = set()

    def visit(answer) -> None:
        if id(answer) in visited:
            return
        visited.add(id(answer))
        try:
            if isinstance(answer, type):
                source, names, where = _class_source(answer)
            else:
                source = textwrap.dedent(inspect.getsource(answer))
                names, where = _global_names(answer.__code__), answer.__globals__
        except (OSError, TypeError, SyntaxError, ValueError, RecursionError):
            facts["missing"].append(getattr(answer, "__name__", "an answer without source"))
            return
        for name in sorted(names):
            if name in where and name != getattr(answer, "__name__", None):
                _place(name, where[name], facts, visit)  # not a built-in, a local or itself
        facts["sources"].append(source)

    for index, answer in enumerate(answers):
        if isinstance(answer, type) and answer.__module__ == "__main__" or \
                isinstance(answer, types.FunctionType) and answer.__closure__ is None:
            facts["names"].append(answer.__name__)
            visit(answer)
        elif _plain_data(answer):
            facts["names"].append(f"_answer_{index}")
            facts["constants"][f"_answer_{index}"] = answer
        else:
            facts["missing"].append(f"an answer that is neither a function, a class nor plain "
                                    f"data (a {type(answer).__name__})")
    return facts
