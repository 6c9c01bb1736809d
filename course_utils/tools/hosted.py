"""Colab and Kaggle: the first code cell of every lesson, and README's links that open them.

A notebook opened on Colab or Kaggle runs on a machine that has PyTorch but not this course.
The cell clones the course's repository there, installs it, and lets the running kernel import
``course_utils`` at once; anywhere else it does nothing and prints nothing (it runs in every
lesson test and every grading run). It cannot import anything of the course, which is not
installed yet when it runs: its logic is all in its text, rendered here from one template with
the repository address from ``[project.urls] Repository`` in pyproject.toml, the one place it is
set. ``course release`` writes it into every lesson of solutions/ (and so into notebooks/), and
writes README's block of "Open in Colab" and "Open in Kaggle" links from the same address (a
GitHub one: both open notebooks from GitHub), or, while none is set, says so there.
"""
from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path

import nbformat

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser as a package (jupyterlab and alembic require it there)
    import tomli as tomllib

CELL_ID = "hosted_setup"
# Read-only and not graded: nbgrader releases it as it is, and no grading depends on it.
NBGRADER = {"grade": False, "grade_id": CELL_ID, "locked": True, "schema_version": 3,
            "solution": False}
# What the lessons import besides PyTorch (tests/test_hosted.py keeps this list complete), with
# the versions pyproject.toml asks for. PyTorch is not among them: the hosted runtime's own
# build matches its GPU and driver, and pip would replace it with a 2.9 GB download.
LESSON_PACKAGES = ("numpy", "scikit-learn", "matplotlib", "tqdm")
URL_SCHEMES = ("https://", "http://", "git@", "ssh://", "file://")
# The branch Colab and Kaggle open a lesson from: the one a clone gets, the repository's default.
BRANCH = "main"
GITHUB = re.compile(r"^(?:https://github\.com/|git@github\.com:)([\w.-]+)/([\w.-]+?)(?:\.git)?/?$")
README_START = ("<!-- hosted-links: written by `course release` from pyproject.toml's "
                "[project.urls] Repository; do not edit -->")
README_END = "<!-- /hosted-links -->"
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
KAGGLE_BADGE = "https://kaggle.com/static/images/open-in-kaggle.svg"

TEMPLATE = '''\
# Colab and Kaggle only: this cell installs the course there (elsewhere it does nothing).
# Choose the GPU BEFORE running it (Colab: Runtime > Change runtime type; Kaggle: Settings >
# Accelerator): changing it afterwards starts a new machine, without what this cell installed.
import importlib.util, os, subprocess, sys

REPOSITORY = @REPOSITORY@  # the course's git address, from its pyproject.toml
NEEDS = [@PACKAGES@]
HOSTED = {"COLAB_RELEASE_TAG", "KAGGLE_KERNEL_RUN_TYPE"} & set(os.environ) \\
    or "google.colab" in sys.modules
CHECKOUT = os.path.expanduser("~/gpu-course")
if HOSTED and not REPOSITORY:
    print("No course repository is named in this cell: set REPOSITORY to the git address "
          "this notebook came from, then run the cell again.")
elif HOSTED and importlib.util.find_spec("course_utils") is None:
    if not os.path.isdir(CHECKOUT):
        subprocess.run(["git", "clone", "-q", "--depth=1", REPOSITORY, CHECKOUT], check=True)
    # --no-warn-conflicts: the course's tools for a local lab and grading (JupyterLab, nbgrader)
    # are not needed here; without it pip lists each in red, as if the install had failed.
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-warn-conflicts"]
    subprocess.run([*pip, "--no-deps", "--editable", CHECKOUT], check=True)  # the course alone
    subprocess.run([*pip, *NEEDS], check=True)  # what else lessons import; torch stays as is
    sys.path.insert(0, CHECKOUT)  # this kernel started before the install: show it the course
    print(f"Installed the course from {REPOSITORY} into {CHECKOUT}.")
'''


class RepositoryError(ValueError):
    """pyproject.toml names a repository address that git cannot clone."""


def _project(root: Path) -> dict:
    return tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def repository_url(root: Path) -> str:
    """``[project.urls] Repository`` from pyproject.toml; "" when it is not set."""
    url = _project(root).get("urls", {}).get("Repository", "").strip()
    if url and (not url.startswith(URL_SCHEMES) or any(c.isspace() for c in url)):
        raise RepositoryError(
            f"pyproject.toml: [project.urls] Repository = {url!r} is not an address git can "
            f"clone: use one starting with {', '.join(URL_SCHEMES)}, without spaces.")
    return url


def lesson_requirements(root: Path) -> list[str]:
    """pyproject.toml's requirements for LESSON_PACKAGES, in that order ('numpy>=1.26', ...)."""
    from packaging.requirements import Requirement

    declared = {}
    for line in _project(root)["dependencies"]:
        requirement = Requirement(line)
        requirement.marker = None
        declared[requirement.name.lower()] = str(requirement)
    missing = [name for name in LESSON_PACKAGES if name not in declared]
    if missing:
        raise ValueError(f"pyproject.toml's dependencies lack {', '.join(missing)}, which the "
                         "lessons import")
    return [declared[name] for name in LESSON_PACKAGES]


def cell_source(repository: str, requirements: list[str]) -> str:
    """The first cell's text for this repository address ("" for none) and requirements."""
    return (TEMPLATE.replace("@REPOSITORY@", json.dumps(repository))
            .replace("@PACKAGES@", ", ".join(map(json.dumps, requirements))).rstrip("\n"))


def course_cell_source(root: Path) -> str:
    """The first cell's text for the course at ``root``."""
    return cell_source(repository_url(root), lesson_requirements(root))


def first_code_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode | None:
    return next((cell for cell in nb.cells if cell.cell_type == "code"), None)


def put_first_cell(nb: nbformat.NotebookNode, source: str) -> bool:
    """Make the notebook's first code cell the hosted set-up cell with ``source``; True when
    that changed the notebook. A cell already there is rewritten, else one is inserted before
    the first code cell (after the lesson's title and introduction)."""
    present = [cell for cell in nb.cells if cell.get("id") == CELL_ID]
    wanted = nbformat.v4.new_code_cell(source, metadata={"nbgrader": dict(NBGRADER)})
    wanted["id"] = CELL_ID
    first = first_code_cell(nb)
    if present == [first] and first.source == source and first.metadata == wanted.metadata:
        return False
    for cell in present:
        nb.cells.remove(cell)
    code = [index for index, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    nb.cells.insert(code[0] if code else len(nb.cells), wanted)
    return True


def update_lessons(root: Path, lessons: list[str], write: bool) -> list[str]:
    """The lessons whose solutions/ notebooks lack today's first cell; with ``write``, put it
    there."""
    from ..paths import lesson_notebooks

    source = course_cell_source(root)
    stale = []
    for lesson in lessons:
        for path in lesson_notebooks(root, lesson):
            nb = nbformat.read(path, as_version=4)
            if put_first_cell(nb, source):
                stale.append(lesson)
                if write:
                    nbformat.write(nb, path)
    return list(dict.fromkeys(stale))


# ------------------------------------------------------------------ README's links

def github_repository(url: str) -> tuple[str, str] | None:
    """(owner, name) of a GitHub address (https or ssh, with or without .git); None for others."""
    match = GITHUB.match(url)
    return (match[1], match[2]) if match else None


def open_links(repository: str, notebook: str) -> dict[str, str]:
    """The Colab and Kaggle addresses that open ``notebook`` (a path in the repository, such as
    notebooks/00_setup/setup.ipynb) from a GitHub ``repository``; {} for any other address."""
    found = github_repository(repository)
    if found is None:
        return {}
    owner, name = found
    on_github = f"{owner}/{name}/blob/{BRANCH}/{notebook}"
    return {"Colab": f"https://colab.research.google.com/github/{on_github}",
            "Kaggle": f"https://kaggle.com/kernels/welcome?src=https://github.com/{on_github}"}


def readme_block(repository: str, notebooks: list[str]) -> str:
    """README's hosted-links block (markers included) for ``repository`` and the released
    ``notebooks`` (paths in the repository)."""
    if github_repository(repository):
        rows = ["| lesson | Colab | Kaggle |", "|---|---|---|"]
        for notebook in notebooks:
            links = open_links(repository, notebook)
            rows.append(f"| `{notebook.split('/')[1]}` "
                        f"| [![Open in Colab]({COLAB_BADGE})]({links['Colab']}) "
                        f"| [![Open in Kaggle]({KAGGLE_BADGE})]({links['Kaggle']}) |")
        body = "\n".join(rows)
    else:
        body = textwrap.fill(
            f"The course's repository, `{repository}`, is not on GitHub, the one place Colab "
            "and Kaggle open notebooks from: download a lesson from it and upload it (Colab: "
            "*File → Upload notebook*; Kaggle: *File → Import Notebook*). Its first cell "
            "installs the course from that address." if repository else
            "**No public address is set yet**, so there are no links to open the lessons on "
            "Colab or Kaggle, and the first cell of each lesson asks for the address. One "
            "setting makes both work: `Repository = \"https://github.com/<owner>/<repository>\"` "
            "under `[project.urls]` in `pyproject.toml`, then `course release`, which writes an "
            "*Open in Colab* and an *Open in Kaggle* badge per lesson here and the address into "
            "every lesson's first cell (`tests/test_hosted.py` checks that the two agree with "
            "the setting).", 96, break_long_words=False, break_on_hyphens=False)
    return f"{README_START}\n{body}\n{README_END}"


def update_readme(root: Path, write: bool) -> bool:
    """Whether README.md's hosted-links block differs from what the address gives; with
    ``write``, rewrite it. A course without README.md has nothing to update."""
    readme = root / "README.md"
    if not readme.is_file():
        return False
    text = readme.read_text(encoding="utf-8")
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"{readme}: the hosted-links block is missing; put the two lines "
                         f"{README_START!r} and {README_END!r} where the links go")
    notebooks = sorted(path.relative_to(root).as_posix()
                       for path in (root / "notebooks").glob("*/*.ipynb"))
    wanted = (text[:start] + readme_block(repository_url(root), notebooks)
              + text[end + len(README_END):])
    if wanted == text:
        return False
    if write:
        readme.write_text(wanted, encoding="utf-8")
    return True
