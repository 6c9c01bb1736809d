"""What each code cell of a submitted notebook does, read from its text (:mod:`ast`, never run).

A :class:`CellFacts` holds the names a cell defines (an assignment, ``def``, ``class``,
import, ``for``/``with`` target, ``del``, or a **change** of a name: ``x.attr = ...``,
``x[i] = ...``, ``x += ...``, ``x.method(...)``, ``x`` passed to a function the notebook
defines), those it binds whatever their old value (at the cell's top level, unconditionally),
those it reads when it runs, and those the functions it defines read when called; whether it
changes a **setting** without setting it back (:data:`SETTINGS`, a module attribute assigned),
seeds a random generator or writes a file (:data:`SEEDS_AND_FILES`, :data:`WRITING_METHODS`),
runs more than definitions, or is **opaque**: ``exec``, ``eval``, ``globals()``, a star
import, ``!`` shell lines, a magic other than ``%timeit``, ``%time``, ``%%capture`` (whose
Python it reads), ``%matplotlib`` and ``%%writefile``, or text that does not parse. needed.py
decides from these which cells grading runs.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

CODE_MAGICS = {"timeit", "time", "capture"}  # their text is Python run in the user namespace
INERT_MAGICS = {"matplotlib"}
ASSIGNED_MAGIC = re.compile(r"[\w\s,()]+=\s*[!%]")  # files = !ls, t = %timeit -o ...
OPAQUE_CALLS = {"exec", "eval", "globals", "locals", "vars", "__import__", "get_ipython",
                "setattr", "delattr", "compile"}
# Module functions (full dotted names, aliases resolved) that change state a later cell sees
# without naming it. An entry ending in "." or "_" is a prefix; any other names one function.
# Settings change what the answers do when the checks call them; seeds and files change only
# what later top-level code computes.
SETTINGS = ("torch.set_", "torch.cuda.set_", "torch.use_deterministic_algorithms",
            "torch._dynamo.config.", "torch._inductor.config.",
            "torch.distributed.init_process_group", "torch.distributed.destroy_process_group",
            "torch.multiprocessing.set_", "multiprocessing.set_", "os.environ.pop",
            "os.environ.update", "os.environ.setdefault", "os.environ.clear", "os.putenv",
            "os.unsetenv", "os.chdir", "sys.path.", "sys.modules.", "sys.set", "builtins.",
            "importlib.reload", "warnings.filterwarnings", "warnings.simplefilter",
            "warnings.resetwarnings", "matplotlib.use", "matplotlib.rc", "matplotlib.pyplot.rc")
SEEDS_AND_FILES = ("torch.manual_seed", "torch.seed", "torch.random.", "torch.cuda.manual_seed",
                   "torch.cuda.manual_seed_all", "random.seed", "random.setstate",
                   "numpy.random.seed", "numpy.random.set_state", "torch.save", "numpy.save",
                   "numpy.savez", "pickle.dump", "json.dump", "os.remove", "os.unlink",
                   "os.rename", "os.replace", "os.makedirs", "os.mkdir", "os.rmdir",
                   "os.symlink", "os.system", "os.write", "shutil.copy", "shutil.move",
                   "shutil.rmtree")
# Methods that write files whatever object they are called on.
WRITING_METHODS = {"write_text", "write_bytes", "mkdir", "touch", "unlink", "rename", "rmdir",
                   "savefig", "to_csv", "save", "symlink_to", "chmod"}
# Calls that change none of their arguments: any other function the notebook defines may
# change the objects passed to it (a method call is taken to change only its object).
PURE_BUILTINS = {"print", "len", "isinstance", "issubclass", "type", "repr", "str", "int",
                 "float", "bool", "sorted", "list", "tuple", "dict", "set", "frozenset",
                 "range", "enumerate", "zip", "min", "max", "sum", "abs", "round", "id", "hash",
                 "format", "iter", "any", "all", "map", "filter", "reversed", "callable"}


@dataclass
class CellFacts:
    """What one code cell does, as far as its text tells."""

    defines: set[str] = field(default_factory=set)   # binds or changes these names
    rebinds: set[str] = field(default_factory=set)   # binds these whatever their old value
    uses: set[str] = field(default_factory=set)      # reads these when it runs
    deferred: set[str] = field(default_factory=set)  # functions it defines read these later
    settings: bool = False        # changes a setting (SETTINGS) and does not set it back
    setters: list[str] = field(default_factory=list)  # SETTINGS it calls, once per call
    seeds_or_files: bool = False  # seeds a random generator or writes files (SEEDS_AND_FILES)
    runs_code: bool = False       # does more than define (imports, def, class, constants)
    opaque: bool = False


# ---------------------------------------------------------------------- reading one cell
def python_of(source: str) -> tuple[str, bool, bool]:
    """(Python text, writes a file, opaque) of a cell: magics the analysis understands become
    their Python code; any other magic or shell line makes the cell opaque."""
    lines = source.splitlines()
    first = lines[0].strip() if lines else ""
    if first.startswith("%%"):
        name = first[2:].split()[0] if first[2:].split() else ""
        if name == "writefile":  # its body is text; `{name}` in its target reads a variable
            names = re.findall(r"\{(\w+)\}", first)
            return "\n".join(names), True, False
        if name not in CODE_MAGICS:
            return "", False, True
        lines = lines[1:]
    code = []
    for line in lines:
        stripped = line.lstrip()
        indent = line[:len(line) - len(stripped)]
        if stripped.startswith("!") or ASSIGNED_MAGIC.match(stripped):
            return "", False, True
        if stripped.startswith("%"):
            words = stripped[1:].split()
            name = words[0] if words else ""
            if name in INERT_MAGICS:
                code.append(indent + "pass")
            elif name in CODE_MAGICS:
                body = [word for word in words[1:] if not word.startswith("-")
                        and not word.isdigit()]
                code.append(indent + " ".join(body) if body else indent + "pass")
            else:
                return "", False, True
        else:
            code.append(line)
    return "\n".join(code), False, False


def analyse_cell(source: str, imported: dict[str, str]) -> CellFacts:
    """The facts of one code cell; ``imported`` maps the notebook's import aliases to the
    dotted names they stand for (filled in by this call for the cell's own imports)."""
    code, writes, opaque = python_of(source)
    facts = CellFacts(seeds_or_files=writes, runs_code=writes, opaque=opaque)
    if opaque:
        return facts
    try:
        for statement in ast.parse(code).body:
            _Reader(facts, imported, top=True).visit(statement)
            facts.runs_code |= not _defines_only(statement)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # e.g. nested too deeply
        return CellFacts(opaque=True)
    # A setter called again later in the cell (in a `finally`, say) sets its value back.
    facts.settings |= any(facts.setters.count(setter) == 1 for setter in facts.setters)
    return facts


def _defines_only(statement: ast.stmt) -> bool:
    """An import, def, class, constant or docstring: nothing that draws numbers or reads files."""
    if isinstance(statement, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
                              ast.ClassDef, ast.Pass)):
        return True
    value = getattr(statement, "value", None)
    return isinstance(statement, (ast.Expr, ast.Assign, ast.AnnAssign)) and (
        value is None or all(isinstance(node, (ast.Constant, ast.Tuple, ast.List, ast.Dict,
                                               ast.Set, ast.Load, ast.UnaryOp, ast.USub))
                             for node in ast.walk(value)))


def _bound_in(nodes: list[ast.AST]) -> set[str]:
    """Names stored anywhere in these nodes, and parameters of functions among them."""
    names = set()
    for node in nodes:
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name) and isinstance(inner.ctx, (ast.Store, ast.Del)):
                names.add(inner.id)
            elif isinstance(inner, ast.arg):
                names.add(inner.arg)
            elif isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(inner.name)
            elif isinstance(inner, (ast.Import, ast.ImportFrom)):
                names.update((alias.asname or alias.name).split(".")[0] for alias in inner.names)
    return names


def _root(node: ast.AST) -> ast.Name | None:
    """The name an attribute or subscript chain starts from (``a`` of ``a.b[0].c``)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node if isinstance(node, ast.Name) else None


def _dotted(node: ast.AST, imported: dict[str, str]) -> str | None:
    """``torch.backends.cudnn.benchmark`` for an attribute chain from an imported name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in imported:
        return None
    return ".".join([imported[node.id], *reversed(parts)])


def listed(dotted: str, entries: tuple[str, ...]) -> bool:
    """Whether a module attribute is one of ``entries`` (SETTINGS, SEEDS_AND_FILES)."""
    return any(dotted.startswith(entry) if entry.endswith((".", "_")) else dotted == entry
               for entry in entries)


class _Reader(ast.NodeVisitor):
    """Reads one top-level statement into the cell's facts (in statement order, so that a
    name the cell bound before is no use of an earlier cell's)."""

    def __init__(self, facts: CellFacts, imported: dict[str, str], top: bool):
        self.facts, self.imported, self.top = facts, imported, top
        self.warnings_restored = False  # inside `with warnings.catch_warnings()`

    def _define(self, name: str, rebind: bool = False) -> None:
        self.facts.defines.add(name)
        if rebind and self.top:
            self.facts.rebinds.add(name)

    def _use(self, name: str) -> None:
        if name not in self.facts.rebinds:
            self.facts.uses.add(name)

    def _nested(self, node: ast.AST) -> None:
        """A statement under if/for/while/try/with: its bindings are conditional."""
        top, self.top = self.top, False
        self.generic_visit(node)
        self.top = top

    visit_If = visit_For = visit_AsyncFor = visit_While = visit_Try = visit_Match = _nested

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        restored = self.warnings_restored
        self.warnings_restored |= any(
            isinstance(item.context_expr, ast.Call)
            and _dotted(item.context_expr.func, self.imported) == "warnings.catch_warnings"
            for item in node.items)
        self._nested(node)
        self.warnings_restored = restored

    visit_AsyncWith = visit_With

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self._use(node.id)
        else:
            self._define(node.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self._target(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self._target(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        self._mutate(node.target)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._mutate(target)

    def _target(self, target: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self._define(target.id, rebind=True)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._target(element)
        elif isinstance(target, ast.Starred):
            self._target(target.value)
        else:
            self._mutate(target)

    def _mutate(self, target: ast.AST) -> None:
        """``x.a = ...``, ``x[i] = ...``, ``x += ...``, ``del x``: x is used and changed; an
        imported module's attribute set is a change of state."""
        for part in ast.iter_child_nodes(target):  # indices and the like are read
            if not isinstance(part, ast.expr_context) and part is not _root(target):
                self.visit(part)
        root = target if isinstance(target, ast.Name) else _root(target)
        if root is None:
            return
        if root.id in self.imported and root is not target:
            self.facts.settings = True  # torch.backends.cudnn.benchmark = True, os.environ[...]
        self._use(root.id)
        self.facts.defines.add(root.id)

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func
        if isinstance(function, ast.Name) and function.id not in PURE_BUILTINS \
                and function.id not in self.imported:
            for argument in [*node.args, *(keyword.value for keyword in node.keywords)]:
                if isinstance(argument, ast.Name) and argument.id not in self.imported:
                    self.facts.defines.add(argument.id)  # the call may change it
        if isinstance(function, ast.Name):
            if function.id in OPAQUE_CALLS:
                self.facts.opaque = True
            if function.id == "open" and _writes(node):
                self.facts.seeds_or_files = True
        elif isinstance(function, ast.Attribute):
            dotted = _dotted(function, self.imported)
            root = _root(function)
            if dotted is not None and listed(dotted, SETTINGS) and not (
                    self.warnings_restored and dotted.startswith("warnings.")):
                self.facts.setters.append(dotted)
            if dotted is not None:
                self.facts.seeds_or_files |= listed(dotted, SEEDS_AND_FILES)
            elif root is not None:
                self.facts.defines.add(root.id)  # a method may change its object
            if function.attr in WRITING_METHODS:
                self.facts.seeds_or_files = True
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            name = alias.asname or alias.name.split(".")[0]
            self.imported[name] = alias.name if alias.asname else name
            self._define(name, rebind=True)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name == "*":
                self.facts.opaque = True
                continue
            name = alias.asname or alias.name
            self.imported[name] = f"{node.module}.{alias.name}" if node.module else name
            self._define(name, rebind=True)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for part in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
            if part is not None:
                self.visit(part)
        self._function_body(node.args, node.body)
        self._define(node.name, rebind=True)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for part in [*node.args.defaults, *node.args.kw_defaults]:
            if part is not None:
                self.visit(part)
        self._function_body(node.args, [node.body])

    def _function_body(self, arguments: ast.arguments, body: list) -> None:
        """What a body reads from the notebook when called; ``global`` names it binds."""
        declared = {name for statement in body for inner in ast.walk(statement)
                    if isinstance(inner, ast.Global) for name in inner.names}
        local = (_bound_in(body) | _bound_in([arguments])) - declared
        for inner in (n for statement in body for n in ast.walk(statement)):
            if isinstance(inner, ast.Name):
                if isinstance(inner.ctx, ast.Load) and inner.id not in local:
                    self.facts.deferred.add(inner.id)
                elif inner.id in declared:
                    self.facts.defines.add(inner.id)
            elif isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) \
                    and inner.func.id in OPAQUE_CALLS:
                self.facts.opaque = True

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for part in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(part)
        inner = CellFacts()
        reader = _Reader(inner, dict(self.imported), top=True)
        for statement in node.body:
            reader.visit(statement)
        self.facts.uses |= inner.uses - self.facts.rebinds
        self.facts.deferred |= inner.deferred
        self.facts.settings |= inner.settings
        self.facts.seeds_or_files |= inner.seeds_or_files
        self.facts.opaque |= inner.opaque
        self._define(node.name, rebind=True)

    def _comprehension(self, node) -> None:
        local = _bound_in([generator.target for generator in node.generators])
        inner = CellFacts()
        reader = _Reader(inner, self.imported, top=False)
        reader.generic_visit(node)
        for name in inner.uses - local:
            self._use(name)
        self.facts.defines |= inner.defines - local
        self.facts.deferred |= inner.deferred
        self.facts.settings |= inner.settings
        self.facts.seeds_or_files |= inner.seeds_or_files
        self.facts.opaque |= inner.opaque

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension


def _writes(call: ast.Call) -> bool:
    """Whether ``open(...)`` may write: a mode that is not a read-only constant."""
    mode = call.args[1] if len(call.args) > 1 else next(
        (keyword.value for keyword in call.keywords if keyword.arg == "mode"), None)
    if mode is None:
        return False
    return not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)
                and not set(mode.value) & set("wax+"))
