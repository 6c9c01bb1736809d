"""The package's layers (docs/architecture.md): imports run one way, from higher wings to lower.

tools > grading > checks > lab > probe > paths. Every import statement of every module counts,
those inside functions too (a lazy import is still a dependency). The few allowed exceptions
are listed in ALLOWED, each with its reason.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "course_utils"

# Lowest first. A module may import its own wing and the wings below it.
WINGS = ("paths", "probe", "lab", "checks", "grading", "tools")
# The package's face (__init__ forwards lazily by name; __main__ starts the command line).
FACE = "face"

# (importing module, imported module) -> why the edge is allowed although the rule forbids it.
# Empty today: add an edge only with its reason, as pytorch/tutorials lists its exceptions.
ALLOWED: dict[tuple[str, str], str] = {}

# (wing, wing below it) -> the only modules of the first that may import the second, and why.
FENCES: dict[tuple[str, str], tuple[set[str], str]] = {
    ("grading", "checks"): ({"course_utils.grading.worker"},
                            "grading/ reaches checks/ only through worker.py's check API"),
}


@dataclass(frozen=True)
class Edge:
    importer: str  # dotted module name
    imported: str  # dotted module name (a package's __init__ named by the package)
    line: int

    def __str__(self) -> str:
        return f"{self.importer} imports {self.imported} (line {self.line})"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The absolute module an ``ImportFrom`` names, relative levels resolved."""
    if not node.level:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def edges(root: Path) -> list[Edge]:
    """Every import, inside ``root``'s package, of one of its own modules."""
    top = root.name
    modules = {module_name(path, root): path for path in root.rglob("*.py")}
    found = []
    for name, path in sorted(modules.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = resolve(node, name, path.name == "__init__.py")
                # `from . import machines` names a module; `from .framework import fail` a name.
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            found.extend(Edge(name, target, node.lineno) for target in targets
                         if target == top or target.startswith(top + "."))
    return found


def wing(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("__main__",):
        return FACE
    return parts[1] if parts[1] in WINGS else FACE


def forbidden(found: list[Edge], allowed: dict[tuple[str, str], str]) -> list[str]:
    """The edges the layer rule forbids and ``allowed`` does not excuse, as sentences."""
    problems = []
    for edge in found:
        if (edge.importer, edge.imported) in allowed:
            continue
        source, target = wing(edge.importer), wing(edge.imported)
        if source == FACE or source == target:
            continue
        if target == FACE:
            problems.append(f"{edge}: only the package's face may be imported by nobody")
        elif source == "probe":
            problems.append(f"{edge}: probe/ is sent to the kernel and imports nothing else")
        elif WINGS.index(target) > WINGS.index(source):
            problems.append(f"{edge}: {source}/ is below {target}/")
        elif (source, target) in FENCES and edge.importer not in FENCES[source, target][0]:
            problems.append(f"{edge}: {FENCES[source, target][1]}")
    return problems


def cycles(found: list[Edge]) -> list[list[str]]:
    """Import cycles between modules (each reported once, from its smallest name)."""
    graph: dict[str, set[str]] = {}
    for edge in found:
        if edge.imported != edge.importer:
            graph.setdefault(edge.importer, set()).add(edge.imported)
    loops, state = [], {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = "open"
        for following in sorted(graph.get(node, ())):
            if state.get(following) == "open":
                loop = trail[trail.index(following):]
                if min(loop) == loop[0]:
                    loops.append([*loop, following])
            elif following not in state:
                visit(following, [*trail, following])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return loops


def test_no_import_runs_from_a_lower_wing_to_a_higher_one():
    problems = forbidden(edges(PACKAGE), ALLOWED)
    assert not problems, "Imports against the layer rule (docs/architecture.md):\n" + "\n".join(
        problems)


def test_every_allowed_exception_is_still_needed_and_has_a_reason():
    found = {(edge.importer, edge.imported) for edge in edges(PACKAGE)}
    for pair, reason in ALLOWED.items():
        assert pair in found, f"{pair} is allowed but no longer imported: remove it from ALLOWED"
        assert len(reason) > 20, f"{pair} needs a reason"


def test_package_modules_form_no_import_cycle():
    # Package __init__ files re-export their own modules: a package and its modules are one unit.
    found = [edge for edge in edges(PACKAGE)
             if not edge.importer.startswith(edge.imported + ".")
             and not edge.imported.startswith(edge.importer + ".")]
    assert cycles(found) == []


def test_probe_modules_import_each_other_only_in_the_form_the_bundle_strips():
    from course_utils.probe import bundle

    for path in sorted((PACKAGE / "probe").glob("*.py")):
        if path.stem in ("__init__", "bundle"):
            continue
        assert path.stem in bundle.MODULES, f"{path.name} is not sent to the kernel"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                text = ast.get_source_segment(path.read_text(encoding="utf-8"), node)
                assert node.col_offset == 0 and bundle._SIBLING_IMPORT.match(text), (
                    f"{path.name}:{node.lineno}: write sibling imports as one top-level line, "
                    f"`from .x import a, b` (the bundle drops exactly those): {text!r}")


def test_the_bundle_runs_alone_and_defines_what_the_probe_package_exports():
    from course_utils import probe
    from course_utils.probe import bundle

    namespace: dict = {}
    exec(compile(bundle.source(), "<probe kit>", "exec"), namespace)  # noqa: S102
    assert set(probe.__all__) <= set(namespace)


# ------------------------------------------------------------------ the test of the test

def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "course_utils"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            (root / parent / "__init__.py").touch()
        path.write_text(text)
    return root


@pytest.mark.parametrize(("files", "expected"), [
    ({"lab/timing.py": "from ..checks import framework\n", "checks/framework.py": ""},
     ("course_utils.lab.timing imports course_utils.checks.framework (line 1): lab/ is below "
      "checks/")),
    ({"probe/facts.py": "def f():\n    from ..paths import course_root\n", "paths.py": ""},
     ("course_utils.probe.facts imports course_utils.paths (line 2): probe/ is sent to the "
      "kernel and imports nothing else")),
    ({"grading/runner.py": "import course_utils.tools.cli\n", "tools/cli.py": ""},
     ("course_utils.grading.runner imports course_utils.tools.cli (line 1): grading/ is below "
      "tools/")),
    ({"checks/x.py": "from course_utils import grading\n", "grading/__init__.py": ""},
     "course_utils.checks.x imports course_utils.grading (line 1): checks/ is below grading/"),
])
def test_a_forbidden_import_is_reported(tmp_path, files, expected):
    assert forbidden(edges(_package(tmp_path, files)), {}) == [expected]


def test_allowed_imports_downward_and_listed_exceptions_pass(tmp_path):
    root = _package(tmp_path, {
        "tools/cli.py": "from ..grading import runner\nfrom ..lab import timing\n",
        "grading/runner.py": "from ..paths import course_root\n",
        "grading/worker.py": "from ..checks import framework\n",
        "checks/framework.py": "from ..probe import facts\n",
        "lab/timing.py": "from ..probe.facts import describe\nfrom .devices import get\n",
        "lab/devices.py": "", "probe/facts.py": "from .models import build\n",
        "probe/models.py": "", "paths.py": "",
    })
    found = edges(root)
    assert forbidden(found, {}) == []


def test_the_grader_reaches_the_checks_only_through_the_worker(tmp_path):
    root = _package(tmp_path, {"grading/runner.py": "from ..checks import REGISTRY\n",
                               "checks/__init__.py": ""})
    found = edges(root)
    assert forbidden(found, {}) == [
        ("course_utils.grading.runner imports course_utils.checks (line 1): grading/ reaches "
         "checks/ only through worker.py's check API")]
    assert forbidden(found, {("course_utils.grading.runner", "course_utils.checks"):
                             "a reason"}) == []


def test_a_cycle_is_reported(tmp_path):
    root = _package(tmp_path, {"lab/a.py": "from . import b\n", "lab/b.py": "from .a import x\n"})
    assert cycles(edges(root)) == [["course_utils.lab.a", "course_utils.lab.b",
                                    "course_utils.lab.a"]]


CHECK_MODULE_LINES = 160  # docs/architecture.md: "A check ... at most 160 lines"


def test_every_check_module_is_at_most_160_lines():
    """Checks no exercise module (checks/lessonNN/) outgrows the bound; rules that would make it
    longer go to <exercise>_rules.py beside it."""
    modules = sorted(PACKAGE.glob("checks/lesson*/*.py"))
    long = {str(path.relative_to(PACKAGE)): lines for path in modules
            if (lines := len(path.read_text().splitlines())) > CHECK_MODULE_LINES}
    assert not long, f"over {CHECK_MODULE_LINES} lines: {long}"
