"""The first cell of every lesson installs the course on Colab and Kaggle, and does nothing
elsewhere (course_utils/tools/hosted.py).

Colab is simulated on this machine: its environment variable (or a `google.colab` module), a
home folder of its own, the course's repository as a local bare clone (file://), and a Python
environment of its own that sees this one's packages (PyTorch & co., as a hosted runtime has
them) but not the course, which pip installs there from the clone with nothing downloaded, nor
JupyterLab, which the course requires for a local lab and a hosted runtime lacks.

README's links that open each lesson on Colab and Kaggle come from the same setting as the
cell's address (`[project.urls] Repository`), written by `course release`.
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest

from course_utils.tools import hosted

from .conftest import ROOT

NOTEBOOKS = sorted(ROOT.glob("solutions/*/*.ipynb")) + sorted(ROOT.glob("notebooks/*/*.ipynb"))
# The cell, run twice in one namespace as a notebook would, then `import course_utils`.
RUN_CELL = """\
import sys
namespace = {}
cell = open(sys.argv[1]).read()
exec(cell, namespace)
exec(cell, namespace)
import course_utils
print("imported from", course_utils.__file__)
"""
NO_REPOSITORY = ("No course repository is named in this cell: set REPOSITORY to the git address "
                 "this notebook came from, then run the cell again.\n")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_lesson_starts_with_the_hosted_cell(path):
    """Checks each notebook's first code cell is today's rendering of the one template."""
    first = hosted.first_code_cell(nbformat.read(path, as_version=4))
    assert first is not None and first.source == hosted.course_cell_source(ROOT), \
        f"{path.relative_to(ROOT)}: run `course release`"
    assert first.metadata["nbgrader"]["grade"] is False, "the hosted cell must not be graded"
    assert first.metadata["nbgrader"]["locked"] is True


def test_put_first_cell_inserts_once_then_rewrites_in_place():
    """Checks the cell goes before the first code cell, and a second put changes nothing."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Title"),
                                         nbformat.v4.new_code_cell("import torch")])
    assert hosted.put_first_cell(nb, "old text")
    assert hosted.put_first_cell(nb, "new text")
    assert not hosted.put_first_cell(nb, "new text")
    assert [cell.source for cell in nb.cells] == ["# Title", "new text", "import torch"]
    nb.cells.insert(1, nb.cells.pop(2))  # moved below another code cell: put back first
    assert hosted.put_first_cell(nb, "new text")
    assert [cell.source for cell in nb.cells] == ["# Title", "new text", "import torch"]


def _course_with_urls(tmp_path: Path, urls: str) -> Path:
    text = (ROOT / "pyproject.toml").read_text().replace("[project.urls]\n",
                                                         f"[project.urls]\n{urls}\n")
    (tmp_path / "pyproject.toml").write_text(text)
    return tmp_path


def test_the_address_comes_from_pyproject(tmp_path):
    """Checks [project.urls] Repository reaches the cell, and none set gives an empty address."""
    assert hosted.repository_url(ROOT) == ""  # none published yet (README: Colab and Kaggle)
    url = "https://git.example.org/course/gpu-course.git"
    course = _course_with_urls(tmp_path, f'Repository = "{url}"')
    assert hosted.repository_url(course) == url
    assert f'REPOSITORY = "{url}"' in hosted.course_cell_source(course)


def test_an_address_git_cannot_clone_is_refused(tmp_path):
    """Checks a Repository that is no git address is named with what is allowed."""
    course = _course_with_urls(tmp_path, 'Repository = "github.com/owner/repo"')
    with pytest.raises(hosted.RepositoryError, match=r"'github.com/owner/repo'.*https://"):
        hosted.repository_url(course)


def test_readme_links_are_what_the_setting_gives():
    """Checks README's Colab and Kaggle block is today's rendering of pyproject's address
    (none yet: the block says so, and how one setting makes the route work)."""
    assert not hosted.update_readme(ROOT, write=False), "run `course release`"
    readme = (ROOT / "README.md").read_text()
    assert "**No public address is set yet**" in readme  # until Repository is set
    assert "colab.research.google.com/github/" not in readme


@pytest.fixture
def published(tmp_path) -> Path:
    """A copy of the course's README and release with a GitHub address set in pyproject.toml."""
    course = _course_with_urls(tmp_path, 'Repository = "https://github.com/example/gpu-course"')
    shutil.copy(ROOT / "README.md", course / "README.md")
    (course / "notebooks").symlink_to(ROOT / "notebooks")
    return course


def test_with_an_address_each_lesson_has_links_that_agree_with_its_first_cell(published):
    """Checks one setting gives every released lesson an Open in Colab and an Open in Kaggle
    link to its notebook on GitHub, and the first cell clones that same repository."""
    assert hosted.update_readme(published, write=True)
    assert not hosted.update_readme(published, write=False)
    readme = (published / "README.md").read_text()
    block = readme[readme.index(hosted.README_START):readme.index(hosted.README_END)]
    colab = re.findall(r"\(https://colab\.research\.google\.com/github/([^/]+)/([^/]+)/blob/"
                       r"main/(notebooks/[^)]+\.ipynb)\)", block)
    kaggle = re.findall(r"\(https://kaggle\.com/kernels/welcome\?src=https://github\.com/"
                        r"([^/]+)/([^/]+)/blob/main/(notebooks/[^)]+\.ipynb)\)", block)
    released = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("notebooks/*/*.ipynb"))
    lessons = len([p for p in (ROOT / "solutions").iterdir() if p.name[:2].isdigit()])
    assert len(released) == lessons
    assert colab == kaggle == [("example", "gpu-course", path) for path in released]
    assert block.count("[![Open in Colab]") == block.count("[![Open in Kaggle]") == lessons
    cell = hosted.course_cell_source(published)
    address = ast.literal_eval(re.search(r"^REPOSITORY = (.+?)  #", cell, re.MULTILINE)[1])
    assert hosted.github_repository(address) == ("example", "gpu-course")
    assert "No public address" not in readme


@pytest.mark.parametrize("url, expected", [
    ("https://github.com/owner/repo", ("owner", "repo")),
    ("https://github.com/owner/repo.git", ("owner", "repo")),
    ("https://github.com/owner/my.repo/", ("owner", "my.repo")),
    ("git@github.com:owner/repo.git", ("owner", "repo")),
    ("https://gitlab.com/owner/repo", None),
    ("https://github.com/owner", None),
])
def test_github_addresses_are_recognised(url, expected):
    """Checks which addresses Colab and Kaggle links can be made for."""
    assert hosted.github_repository(url) == expected


def test_an_address_off_github_says_how_to_open_a_lesson():
    """Checks a repository elsewhere gets no links that cannot work, and the upload route."""
    block = hosted.readme_block("https://git.example.org/course.git",
                                ["notebooks/00_setup/setup.ipynb"])
    assert "colab.research.google.com" not in block and "Upload notebook" in block


def test_needs_cover_what_the_lessons_import():
    """Checks every third-party module the lessons and the learner's package import is
    installed by the cell (NEEDS), comes with PyTorch or the kernel, or is the course's."""
    # scipy (lesson 10) is a requirement of scikit-learn: installing that installs it
    distributions = {"numpy": "numpy", "sklearn": "scikit-learn", "matplotlib": "matplotlib",
                     "tqdm": "tqdm", "scipy": "scikit-learn"}
    # with PyTorch (typing_extensions), the kernel (IPython) and pip (packaging)
    provided = {"torch", "typing_extensions", "IPython", "packaging", "course_utils"}
    # IPython's magics and shell lines are not Python (in notebooks only: a .py line may
    # start with `!=`)
    sources = ["\n".join(line for line in cell.source.splitlines()
                         if not line.lstrip().startswith(("%", "!")))
               for path in sorted(ROOT.glob("solutions/*/*.ipynb"))
               for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]
    package = ROOT / "course_utils"
    for wing in ("lab", "probe", "checks"):
        sources += [p.read_text() for p in (package / wing).rglob("*.py")]
    # lessons 00 and 04 run the doctor, which reads the grading sandbox's and limits' state
    for module in ("__init__.py", "grading/cgroups.py", "grading/sandbox.py"):
        sources.append((package / module).read_text())
    sources += [p.read_text() for p in (package / "tools").glob("doctor*.py")]
    imported = set()
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - provided
    assert third_party <= set(distributions), f"not installed on Colab: {third_party}"
    assert {distributions[name] for name in third_party} <= set(hosted.LESSON_PACKAGES)


# ------------------------------------------------------------------ the cell, run for real

def _run(cell: str, where: Path, env: dict[str, str], python: str = sys.executable):
    (where / "cell.py").write_text(cell)
    (where / "run.py").write_text(RUN_CELL)
    return subprocess.run([python, "run.py", "cell.py"], check=False, cwd=where, env=env,
                          text=True, capture_output=True, timeout=120)


def _plain_env(home: Path, **extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items()
           if name not in {"COLAB_RELEASE_TAG", "KAGGLE_KERNEL_RUN_TYPE", "PYTHONPATH",
                           "VIRTUAL_ENV", "COURSE_ROOT"}}
    return {**env, "HOME": str(home), **extra}


@pytest.fixture
def home(tmp_path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def test_outside_colab_and_kaggle_the_cell_does_nothing(tmp_path, home):
    """Checks the cell prints nothing, writes nothing and leaves the course as installed."""
    done = _run(hosted.course_cell_source(ROOT), tmp_path, _plain_env(home))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"imported from {ROOT / 'course_utils' / '__init__.py'}\n"
    assert list(home.iterdir()) == []


@pytest.mark.parametrize("hosted_by", ["colab-variable", "colab-module", "kaggle"])
def test_without_an_address_it_says_so_in_one_line(tmp_path, home, hosted_by):
    """Checks each way of recognising Colab or Kaggle, with no address: one clear line per
    run, no traceback, nothing cloned."""
    env = _plain_env(home, **{"colab-variable": {"COLAB_RELEASE_TAG": "release-test"},
                              "kaggle": {"KAGGLE_KERNEL_RUN_TYPE": "Interactive"},
                              "colab-module": {"PYTHONPATH": str(tmp_path)}}[hosted_by])
    cell = hosted.cell_source("", hosted.lesson_requirements(ROOT))
    if hosted_by == "colab-module":  # Colab's kernel imports google.colab before any cell
        (tmp_path / "google" / "colab").mkdir(parents=True)
        (tmp_path / "google" / "colab" / "__init__.py").write_text("")
        cell = "import google.colab\n" + cell
    done = _run(cell, tmp_path, env)
    assert done.stdout.startswith(NO_REPOSITORY * 2), done.stdout + done.stderr
    assert (done.returncode, done.stderr) == (0, "")
    assert list(home.iterdir()) == []


# Hidden from the simulated runtime: JupyterLab (the course requires it for a local lab; a
# hosted runtime lacks it), and tqdm, which the cell then installs from a stand-in wheel, so
# that pip checks the environment after installing, where it would report JupyterLab in red.
HIDDEN = {"jupyterlab", "tqdm"}
STAND_IN_TQDM = "4.99.0"


def stand_in_wheel(folder: Path, name: str, version: str) -> Path:
    """A minimal wheel that pip installs offline (an empty module and its metadata)."""
    import zipfile

    info = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": "",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                             "Tag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    folder.mkdir(exist_ok=True)
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def simulated_runtime(folder: Path, hidden: set[str]) -> tuple[Path, Path]:
    """A hosted runtime's Python: it sees this environment's packages, less the distributions
    and modules named in ``hidden`` (linked into a folder that a .pth line names, so that the
    course's editable install hook stays out), and installs into its own site-packages, which
    come first. Its interpreter and site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "runtime")],
                   check=True)
    site = Path(sysconfig.get_path("purelib", vars={"base": str(folder / "runtime")}))
    packages = folder / "packages"
    packages.mkdir()
    for entry in Path(sysconfig.get_path("purelib")).iterdir():
        if entry.name.split("-")[0].split(".")[0].lower() not in hidden:
            (packages / entry.name).symlink_to(entry)
    (site / "hosted-runtime.pth").write_text(f"{packages}\n")
    return folder / "runtime" / "bin" / "python", site


@pytest.fixture(scope="module")
def colab(tmp_path_factory) -> dict:
    """A simulated Colab machine: a bare clone of this course, a home, and a Python that has
    this environment's packages (less HIDDEN) but not the course."""
    folder = tmp_path_factory.mktemp("colab")
    bare = folder / "course.git"
    cloned = subprocess.run(["git", "clone", "--bare", "--depth=1", "--quiet", ROOT.as_uri(),
                             str(bare)], check=False, capture_output=True, text=True)
    assert cloned.returncode == 0, f"cannot clone this checkout: {cloned.stderr}"
    python, site = simulated_runtime(folder, HIDDEN)
    wheels = stand_in_wheel(folder / "wheels", "tqdm", STAND_IN_TQDM).parent
    (folder / "home").mkdir()
    env = _plain_env(folder / "home", COLAB_RELEASE_TAG="release-test",
                     PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheels),
                     # pip's inverted spelling: "0" turns build isolation off, so that the
                     # build uses this environment's setuptools instead of downloading one.
                     PIP_NO_BUILD_ISOLATION="0")
    return {"folder": folder, "bare": bare, "python": str(python),
            "env": env, "checkout": folder / "home" / "gpu-course", "site": site}


def test_on_colab_it_clones_installs_and_the_same_process_imports_the_course(colab):
    """Checks the first run clones and installs, the second changes nothing, and the running
    process imports course_utils from the clone, as does a fresh one (runtime restarted). pip
    prints no red resolver error for what the course requires and the runtime lacks."""
    cell = hosted.cell_source(colab["bare"].as_uri(), hosted.lesson_requirements(ROOT))
    work = colab["folder"] / "work"
    work.mkdir()
    done = _run(cell, work, colab["env"], colab["python"])
    installed = f"Installed the course from {colab['bare'].as_uri()} into {colab['checkout']}.\n"
    imported = f"imported from {colab['checkout'] / 'course_utils' / '__init__.py'}\n"
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == installed + imported  # the second run: nothing to do, silently
    assert "Traceback" not in done.stderr and "ERROR" not in done.stderr, done.stderr
    # pip installed the missing tqdm, then checked what the course requires, quietly
    assert (colab["site"] / f"tqdm-{STAND_IN_TQDM}.dist-info").is_dir()
    assert (colab["checkout"] / ".git").is_dir()
    restarted = _run(cell, work, colab["env"], colab["python"])
    assert (restarted.returncode, restarted.stdout) == (0, imported), restarted.stderr
