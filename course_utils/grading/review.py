"""Answers that reach past their own code: graded as usual, flagged `review` for the instructor.

A probe runs in the learner's kernel, where the learner's code can reach it: through frames
(``sys._getframe``, ``f_back``, ``f_locals``), closures (``__closure__``, ``cell_contents``),
the garbage collector's lists of objects, builtins, or by patching ``torch`` or the course
package that the probe calls. Where a verdict rests on what the probe observes, such code can
forge it; no honest answer to the course's exercises needs any of it. The notebook's source is
read here (never run) and each such reach named; the verdict stands and the instructor decides
(grades.csv's ``review`` column, the feedback page, the autograded copy formgrader shows).
"""
from __future__ import annotations

import ast
from collections.abc import Iterator

# Attributes that lead to a caller's or a function's variables, or to the builtins.
REACHING_ATTRIBUTES = frozenset({
    "f_back", "f_locals", "f_globals", "f_builtins", "tb_frame", "gi_frame", "cr_frame",
    "ag_frame", "__closure__", "cell_contents", "__code__", "__globals__", "__builtins__",
    "__subclasses__", "_getframe", "currentframe", "getouterframes", "getclosurevars",
    "get_objects", "get_referrers", "get_referents", "settrace", "setprofile"})
# The kernel's own machinery, which carries the grader's probe in and its result out: its
# message handlers (a rewired execute_request can rename the answer the probe is given), the
# display formatters (which turn the result into the text the grader reads), the input and
# AST transformers, its sockets. Ordinary calls, no frame or patch, and no answer needs them.
KERNEL_MACHINERY = frozenset({
    "shell_handlers", "control_handlers", "display_formatter", "for_type", "for_type_by_name",
    "input_transformers_cleanup", "input_transformers_post", "ast_transformers", "iopub_socket",
    "shell_stream", "do_execute", "user_expressions", "get_parent"})
# Process groups built by hand, beside the one a probe hands over (lesson 07's marks every
# all-reduce on its own group: one built by hand would all-reduce unseen).
OWN_PROCESS_GROUPS = frozenset({"ProcessGroupGloo", "ProcessGroupNCCL", "ProcessGroupMPI",
                                "ProcessGroupUCC", "ProcessGroupXCCL"})
REACHING_MODULES = frozenset({"builtins", "ctypes", "gc"})  # gc.collect() alone is no reach
GC_CALLS = frozenset({"get_objects", "get_referrers", "get_referents"})
# Builtins the grader's probe expression and the probes call by bare name.
PROBE_BUILTINS = frozenset({"exec", "eval", "compile", "__import__", "__builtins__",
                            "__build_class__", "globals", "vars", "getattr", "setattr", "repr"})
# Code whose text is built at run time, where reading the source cannot follow it; and
# the process's own descriptors and /proc, through which code can write past the probe (the
# channel the alone server reports on, grading/alone_server.py). No answer needs any of them.
DYNAMIC_CODE = frozenset({"exec", "eval", "compile", "__import__", "import_module"})
REACHING_OS = frozenset({"write", "dup", "dup2", "fdopen", "_exit", "kill", "fork", "forkpty",
                         "pidfd_open", "pidfd_send_signal"})
PATCHED_ROOTS = ("torch", "course_utils", "json", "sys", "builtins")
TUNING = ("torch.backends.",)  # settings the lessons teach (cudnn.benchmark, TF32), no patch


def review_reasons(sources: list[str]) -> list[str]:
    """What the learner's code cells reach or patch, one phrase each, in order, no repeats
    (the cells the course gives, ``LessonNotebook.given``, are left out by the caller)."""
    found: dict[str, None] = {}
    for source in sources:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # IPython magics, say: the cell is still run, and judged by its effects
        for reason in _reaches(tree):
            found.setdefault(reason, None)
    return list(found)


def learner_code(nb, spec) -> list[str]:
    """The code cells of a submitted notebook that the grader runs and the course did not
    write (test cells are never run; a demo cell as released is the course's code)."""
    tests = {item.grade_id for item in spec.items if item.auto}
    return [cell.source for cell in nb.cells if cell.cell_type == "code"
            and cell.source not in spec.given
            and cell.metadata.get("nbgrader", {}).get("grade_id") not in tests]


def _reaches(tree: ast.AST) -> Iterator[str]:
    roots = _import_roots(tree)
    for node in ast.walk(tree):
        yield from _node_reaches(node, roots)
    for name in _top_level_bindings(tree):
        if name in PROBE_BUILTINS:
            yield f"rebinds the builtin `{name}`, which the grader's probe calls"


def _node_reaches(node: ast.AST, roots: dict[str, str]) -> Iterator[str]:
    if isinstance(node, ast.Attribute):
        yield from _attribute_reaches(node, roots)
    elif isinstance(node, ast.Import | ast.ImportFrom):
        for module in _imported(node):
            if module.split(".")[0] in REACHING_MODULES - {"gc"}:
                yield f"imports `{module}`"
            elif module.rsplit(".", 1)[-1] in OWN_PROCESS_GROUPS:
                yield f"builds a process group of its own (`{module.rsplit('.', 1)[-1]}`)"
    elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
        targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
        for target in targets:
            yield from _patches(target, roots)
    elif isinstance(node, ast.Call):
        yield from _call_reaches(node, roots)
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
            and node.value.startswith(("/proc/", "/dev/fd")):
        yield f"names `{node.value[:40]}` (the processes' own files)"


def _call_reaches(node: ast.Call, roots: dict[str, str]) -> Iterator[str]:
    called = _dotted(node.func, roots)
    name = called.rsplit(".", 1)[-1]
    if name in ("setattr", "delattr") and isinstance(node.func, ast.Name) and node.args:
        patched = _dotted(node.args[0], roots)
        if patched.split(".")[0] in PATCHED_ROOTS:
            yield f"patches `{patched}` ({name})"
    elif name in DYNAMIC_CODE and (isinstance(node.func, ast.Name) or called.startswith(
            ("builtins.", "importlib."))):
        if name in ("__import__", "import_module") and node.args and isinstance(
                node.args[0], ast.Constant) and str(node.args[0].value).split(".")[0] \
                not in REACHING_MODULES:
            return  # a module named in the source: as plain as an import statement
        yield f"runs code or imports built at run time (`{name}`)"
    elif name in REACHING_OS and called.startswith("os."):
        yield f"calls `{called}` (the process's own descriptors or processes)"


def _attribute_reaches(node: ast.Attribute, roots: dict[str, str]) -> Iterator[str]:
    if node.attr in KERNEL_MACHINERY:
        yield f"reaches `{node.attr}` (the kernel's machinery that carries the grader's probe)"
    elif node.attr in OWN_PROCESS_GROUPS:
        yield f"builds a process group of its own (`{node.attr}`)"
    elif node.attr in REACHING_ATTRIBUTES and (
            node.attr not in GC_CALLS or _dotted(node.value, roots).startswith("gc")):
        yield f"reads `{node.attr}` (frames, closures or the interpreter's objects)"


def _patches(target: ast.AST, roots: dict[str, str]) -> Iterator[str]:
    if isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            yield from _patches(element, roots)
    elif isinstance(target, ast.Attribute | ast.Subscript):
        patched = _dotted(target, roots)
        if patched.split(".")[0] in PATCHED_ROOTS and not patched.startswith(TUNING):
            yield f"patches `{patched}`"


def _dotted(node: ast.AST, roots: dict[str, str]) -> str:
    """``torch._dynamo.explain`` for an expression reaching it through any import alias."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
        node = node.value if not isinstance(node, ast.Call) else node.func
    if isinstance(node, ast.Name):
        parts.append(roots.get(node.id, node.id))
    return ".".join(reversed(parts))


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    return [f"{base}.{alias.name}" if base else alias.name for alias in node.names]


def _import_roots(tree: ast.AST) -> dict[str, str]:
    """Each name an import binds, to the module path it stands for."""
    roots: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                roots[alias.asname or alias.name.split(".")[0]] = \
                    alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                roots[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return roots


def _top_level_bindings(tree: ast.AST) -> Iterator[str]:
    """Names a cell binds in the kernel's global namespace."""
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                yield from (name.id for name in ast.walk(target) if isinstance(name, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            yield from (alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Global):
            yield from node.names
