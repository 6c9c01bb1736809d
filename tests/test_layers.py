"""The package's layers (docs/architecture.md): imports run one way, from higher wings to lower.

tools > grading > checks > lab > probe > paths. Every import statement of every module counts,
those inside functions too (a lazy import is still a dependency). The few allowed exceptions
are listed in ALLOWED, each with its reason.
"""
from __future__ import annotations

import ast
import json
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
    ("grading", "checks"): ({"course_utils.grading.check_api", "course_utils.grading.alone",
                             "course_utils.grading.alone_server"},
                            ("grading/ reaches checks/ only through check_api.py and the alone "
                             "process's two sides, which speak clean_run.py's protocol")),
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
        "grading/check_api.py": "from ..checks import framework\n",
        "checks/framework.py": "from ..probe import facts\n",
        "lab/timing.py": "from ..probe.facts import describe\nfrom .devices import get\n",
        "lab/devices.py": "", "probe/facts.py": "from .models import build\n",
        "probe/models.py": "", "paths.py": "",
    })
    found = edges(root)
    assert forbidden(found, {}) == []


def test_the_grader_reaches_the_checks_only_through_its_check_api(tmp_path):
    root = _package(tmp_path, {"grading/runner.py": "from ..checks import REGISTRY\n",
                               "checks/__init__.py": ""})
    found = edges(root)
    assert forbidden(found, {}) == [
        ("course_utils.grading.runner imports course_utils.checks (line 1): grading/ reaches "
         "checks/ only through check_api.py and the alone process's two sides, which speak "
         "clean_run.py's protocol")]
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


MODULE_LINES = 400  # docs/architecture.md: "no module over 400 lines"


def modules_over(root: Path, limit: int = MODULE_LINES) -> dict[str, int]:
    """The package's modules longer than ``limit`` lines, with their lengths."""
    return {str(path.relative_to(root)): lines for path in sorted(root.rglob("*.py"))
            if (lines := len(path.read_text().splitlines())) > limit}


def test_every_module_is_at_most_400_lines():
    """A module past 400 lines holds several concerns: split it by concern (as grading/cgroups
    became cgroups, groups and fairtime) rather than raise the bound."""
    long = modules_over(PACKAGE)
    assert not long, f"over {MODULE_LINES} lines, split by concern: {long}"


def test_a_long_module_is_reported(tmp_path):
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "short.py").write_text("x = 1\n" * MODULE_LINES)
    (tmp_path / "lab" / "long.py").write_text("x = 1\n" * (MODULE_LINES + 1))
    assert modules_over(tmp_path) == {"lab/long.py": MODULE_LINES + 1}


# ------------------------------------------------------------------ the lessons' imports
#
# Learners import the course one way, through the package's face (course_utils/__init__.py):
# `from course_utils import timing, checks, get_device`. So (1) a module of lab/ serves the
# lessons: one that only checks/, grading/ or tools/ use belongs to their wing; (2) a lesson
# never imports tools/, grading/ or checks/ (other than the face's `checks`); (3) a lesson's
# every import of the course is `from course_utils import <a name the face offers>`.

SOLUTIONS = PACKAGE.parent / "solutions"
ABOVE_LAB = ("checks", "grading", "tools")


def face_names(package: Path = PACKAGE) -> dict[str, str]:
    """What `from course_utils import NAME` gives, by name: the module that defines it."""
    tree = ast.parse((package / "__init__.py").read_text(encoding="utf-8"))
    found: dict[str, str] = {"checks": f"{package.name}.checks"}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, (ast.Set, ast.List)):
            names = [item.value for item in node.value.elts if isinstance(item, ast.Constant)]
            target = node.targets[0].id if isinstance(node.targets[0], ast.Name) else ""
            if target == "_LAB_MODULES":
                found.update({name: f"{package.name}.lab.{name}" for name in names})
            elif target == "_DEVICE_HELPERS":
                found.update({name: f"{package.name}.lab.devices" for name in names})
    return found


def cell_code(source: str) -> str:
    """A code cell as Python: IPython's magics and shell lines dropped (a %%writefile cell's
    body is a script, and is kept)."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line
                     for line in source.splitlines())


def lesson_sources(root: Path = SOLUTIONS) -> dict[str, str]:
    """Every code cell of every lesson, as Python, by 'lesson/notebook.ipynb#cell id'."""
    sources = {}
    for path in sorted(root.glob("*/*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                where = f"{path.parent.name}/{path.name}#{cell.get('id')}"
                sources[where] = cell_code("".join(cell["source"]))
    return sources


def course_imports(sources: dict[str, str], top: str = "course_utils"):
    """(where, line, node, module, name) for each name a lesson imports from the course."""
    for where, text in sources.items():
        for node in ast.walk(ast.parse(cell_code(text), where)):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == top or alias.name.startswith(top + "."):
                        yield where, node.lineno, node, alias.name, None
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module and (
                    node.module == top or node.module.startswith(top + ".")):
                for alias in node.names:
                    yield where, node.lineno, node, node.module, alias.name


def lessons_reaching_above_lab(sources: dict[str, str], top: str = "course_utils") -> list[str]:
    """Rule 2: lesson imports of tools/, grading/ or checks/ other than the face's `checks`."""
    problems = []
    for where, line, _node, module, name in course_imports(sources, top):
        dotted = f"{module}.{name}" if module == top and name else module
        wing_name = dotted.split(".")[1] if "." in dotted else ""
        if wing_name in ABOVE_LAB and not (module == top and name == "checks"):
            problems.append(f"{where} line {line}: imports {dotted}: lessons use the learner's "
                            "face only (lab/ through `from course_utils import ...`, and checks)")
    return problems


def lesson_imports_off_style(sources: dict[str, str], face: dict[str, str],
                             top: str = "course_utils") -> list[str]:
    """Rule 3: every course import is `from course_utils import NAME`, NAME one the face offers."""
    problems = []
    for where, line, node, module, name in course_imports(sources, top):
        if isinstance(node, ast.Import) or module != top:
            shown = f"import {module}" if isinstance(node, ast.Import) else \
                f"from {module} import {name}"
            problems.append(f"{where} line {line}: `{shown}`: write `from {top} import ...`")
        elif name not in face:
            problems.append(f"{where} line {line}: `from {top} import {name}`: the face offers "
                            f"no {name!r} ({', '.join(sorted(face))})")
    return problems


def _bindings_and_uses(tree: ast.AST, name: str, is_package: bool, modules: set[str],
                       exports: dict[str, dict[str, str]], face: dict[str, str], top: str
                       ) -> set[str]:
    """The course modules a module (or a lesson cell) uses: what it imports, resolved through
    package re-exports to the module that defines each name, and `alias.attribute` uses."""
    def target(base: str, attr: str) -> str:
        if f"{base}.{attr}" in modules:
            return f"{base}.{attr}"
        return exports.get(base, {}).get(attr, base)

    used, aliases = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == top:
                    used.add(alias.name)
                    aliases[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom):
            base = resolve(node, name, is_package) if node.level else (node.module or "")
            if base.split(".")[0] != top:
                continue
            for alias in node.names:
                found = face.get(alias.name, target(base, alias.name)) if base == top else \
                    target(base, alias.name)
                used.add(found)
                aliases[alias.asname or alias.name] = found
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id in aliases:
            used.add(target(aliases[node.value.id], node.attr))
    return used


def _re_exports(paths: dict[str, Path]) -> dict[str, dict[str, str]]:
    """package -> {name: its module}, from each package __init__'s `from .module import name`."""
    exports: dict[str, dict[str, str]] = {}
    for name, path in paths.items():
        if path.name == "__init__.py":
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                    exports.setdefault(name, {}).update(
                        {alias.asname or alias.name: f"{name}.{node.module}"
                         for alias in node.names})
    return exports


def _users(root: Path, sources: dict[str, str], face: dict[str, str]
           ) -> tuple[dict[str, Path], dict[str, set[str]]]:
    """Each module of the package, and who uses it: modules, and lessons ('lesson NAME')."""
    top = root.name
    paths = {module_name(path, root): path for path in root.rglob("*.py")}
    exports, users = _re_exports(paths), {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for used in _bindings_and_uses(tree, name, path.name == "__init__.py", set(paths),
                                       exports, face, top):
            if not (path.name == "__init__.py" and used.startswith(name + ".")):
                users.setdefault(used, set()).add(name)
    notebooks: dict[str, list[str]] = {}  # a name bound in one cell is used in the next
    for where, text in sources.items():
        notebooks.setdefault(where.split("#")[0], []).append(cell_code(text))
    for notebook, texts in notebooks.items():
        tree = ast.parse("\n".join(texts), notebook)
        for used in _bindings_and_uses(tree, "lesson", False, set(paths), exports, face, top):
            users.setdefault(used, set()).add(f"lesson {notebook}")
    return paths, users


def learner_modules_only_above_use(root: Path, sources: dict[str, str],
                                   face: dict[str, str]) -> list[str]:
    """Rule 1: lab/ modules used by checks/, grading/ or tools/ and by no lesson or lab module.

    A package's re-export of its own module is not a use (the lesson 07 check's simulated rank
    once sat in lab/distributed/ that way): what counts is who uses the name."""
    paths, users = _users(root, sources, face)
    problems = []
    for module in sorted(paths):
        if wing(module) != "lab" or paths[module].name in ("__init__.py", "__main__.py"):
            continue
        who = users.get(module, set()) - {module}
        above = sorted(user for user in who if not user.startswith("lesson ")
                       and wing(user) in ABOVE_LAB)
        learners = [user for user in who if user.startswith("lesson ") or wing(user) == "lab"]
        if above and not learners:
            problems.append(f"{module} is in lab/, but only {', '.join(above)} use it: move it "
                            "to the wing of its users")
    return problems


def test_every_lab_module_serves_a_lesson_or_another_lab_module():
    problems = learner_modules_only_above_use(PACKAGE, lesson_sources(), face_names())
    assert not problems, "\n".join(problems)


def test_lessons_never_import_the_grader_the_commands_or_the_checks_inside():
    problems = lessons_reaching_above_lab(lesson_sources())
    assert not problems, "\n".join(problems)


def test_lessons_import_the_course_one_way():
    problems = lesson_imports_off_style(lesson_sources(), face_names())
    assert not problems, "\n".join(problems)


def test_a_lab_module_only_a_check_uses_is_reported(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "_LAB_MODULES = {'ddp', 'timing'}\n",
        "lab/timing.py": "", "lab/helper.py": "",
        "lab/ddp/__init__.py": "from .launch import launch\nfrom .simulate import simulate\n",
        "lab/ddp/launch.py": "", "lab/ddp/simulate.py": "",
        "checks/x.py": ("from ..lab import helper, timing\nfrom ..lab import ddp as d\n\n"
                        "d.simulate()\nd.launch()\n"),
    })
    lessons = {"04/x.ipynb#setup": "from course_utils import ddp, timing\nddp.launch()\n"}
    assert learner_modules_only_above_use(root, lessons, face_names(root)) == [
        ("course_utils.lab.ddp.simulate is in lab/, but only course_utils.checks.x use it: move "
         "it to the wing of its users"),
        ("course_utils.lab.helper is in lab/, but only course_utils.checks.x use it: move it to "
         "the wing of its users")]
    # A lab module that uses it, or a lesson, keeps it in lab/.
    (root / "lab/timing.py").write_text("from . import helper\n")
    lessons["04/x.ipynb#later"] = "ddp.simulate()\n"
    assert learner_modules_only_above_use(root, lessons, face_names(root)) == []


def test_a_lesson_importing_the_grader_the_commands_or_a_check_is_reported():
    lessons = {"00/setup.ipynb#setup": ("from course_utils import checks, get_device\n"
                                        "from course_utils.tools import doctor\n"),
               "04/x.ipynb#a": "import course_utils.grading.sandbox\n",
               "04/x.ipynb#b": "%%writefile x.py\nfrom course_utils.checks import machines\n",
               "04/x.ipynb#c": "from course_utils import tools\n"}
    assert lessons_reaching_above_lab(lessons) == [
        ("00/setup.ipynb#setup line 2: imports course_utils.tools: lessons use the learner's face "
         "only (lab/ through `from course_utils import ...`, and checks)"),
        ("04/x.ipynb#a line 1: imports course_utils.grading.sandbox: lessons use the learner's "
         "face only (lab/ through `from course_utils import ...`, and checks)"),
        ("04/x.ipynb#b line 2: imports course_utils.checks: lessons use the learner's face only "
         "(lab/ through `from course_utils import ...`, and checks)"),
        ("04/x.ipynb#c line 1: imports course_utils.tools: lessons use the learner's face only "
         "(lab/ through `from course_utils import ...`, and checks)")]


def test_a_lesson_import_in_another_style_is_reported():
    face = {"checks": "", "errors": "", "get_device": ""}
    lessons = {"01/x.ipynb#setup": ("from course_utils import checks, errors, get_device\n"
                                    "from course_utils.lab.errors import show_error\n"),
               "01/x.ipynb#a": "import course_utils\n",
               "01/x.ipynb#b": "from course_utils import show_error\n"}
    assert lesson_imports_off_style(lessons, face) == [
        ("01/x.ipynb#setup line 2: `from course_utils.lab.errors import show_error`: write "
         "`from course_utils import ...`"),
        "01/x.ipynb#a line 1: `import course_utils`: write `from course_utils import ...`",
        ("01/x.ipynb#b line 1: `from course_utils import show_error`: the face offers no "
         "'show_error' (checks, errors, get_device)")]
