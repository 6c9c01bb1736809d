"""Lesson 00 opened on Colab, simulated from its first cell to its first exercise, as a learner
runs it (`make test-colab`; skipped by `make test`, because the first cell installs NumPy,
scikit-learn, matplotlib and tqdm from the package index, as it does on a real runtime).

The runtime: a Python environment of its own that sees this one's packages (PyTorch, Jupyter's
kernel and nbclient, as a hosted runtime has them) less the four the cell installs and
JupyterLab (which a hosted runtime lacks); Colab's environment variable; a home of its own; the
course's repository as a bare clone (file://) standing in for GitHub, written into the first
cell as `course release` would write the published address. nbclient runs the released lesson
in that runtime's kernel and stops at the first error, as Colab's Run all does.
"""
from __future__ import annotations

import os
import subprocess

import nbformat
import pytest

from course_utils.tools import hosted

from .conftest import ROOT
from .test_hosted import simulated_runtime

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get("COURSE_COLAB_SIMULATION"),
                       reason="installs NumPy, scikit-learn, matplotlib and tqdm from the "
                              "package index: run it with `make test-colab`"),
]

LESSON = ROOT / "notebooks" / "00_setup" / "setup.ipynb"
# What the cell installs (their modules and files), and JupyterLab: not on the runtime.
HIDDEN = {"numpy", "sklearn", "scikit_learn", "matplotlib", "mpl_toolkits", "pylab", "tqdm",
          "jupyterlab"}
RUN = """\
import sys
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

nb = nbformat.read(sys.argv[1], as_version=4)
try:
    NotebookClient(nb, kernel_name="python3", timeout=600, allow_errors=False).execute()
except CellExecutionError:
    pass  # Run all stops at the first error; the notebook keeps what ran
nbformat.write(nb, sys.argv[2])
"""


def text_of(cell) -> str:
    return "".join(output.get("text", "") + "".join(output.get("traceback", []))
                   for output in cell.get("outputs", []))


def test_lesson_00_on_colab_runs_from_its_first_cell_to_its_first_exercise(tmp_path):
    """Checks the first cell installs the course and what the lessons import, without pip's red
    resolver error, that every cell before the first exercise's check then runs in the same
    kernel, and that the check says the exercise is not done yet."""
    bare = tmp_path / "course.git"
    subprocess.run(["git", "clone", "--bare", "--depth=1", "--quiet", ROOT.as_uri(), str(bare)],
                   check=True)
    python, _ = simulated_runtime(tmp_path, HIDDEN)
    nb = nbformat.read(LESSON, as_version=4)
    hosted.first_code_cell(nb).source = hosted.cell_source(
        bare.as_uri(), hosted.lesson_requirements(ROOT))
    nbformat.write(nb, tmp_path / "lesson.ipynb")
    (tmp_path / "home").mkdir()
    (tmp_path / "run.py").write_text(RUN)
    env = {name: value for name, value in os.environ.items()
           if name not in {"PYTHONPATH", "VIRTUAL_ENV", "COURSE_ROOT", "JUPYTER_PATH",
                           "JUPYTER_CONFIG_PATH"}}
    env.update(HOME=str(tmp_path / "home"), COLAB_RELEASE_TAG="release-test",
               JUPYTER_PLATFORM_DIRS="1",
               # the locked versions, which match the packages the runtime already has
               PIP_CONSTRAINT=str(ROOT / "requirements.lock"))
    done = subprocess.run([str(python), "run.py", "lesson.ipynb", "ran.ipynb"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    ran = [cell for cell in nbformat.read(tmp_path / "ran.ipynb", as_version=4).cells
           if cell.cell_type == "code"]
    first = text_of(ran[0])
    assert f"Installed the course from {bare.as_uri()}" in first, first
    assert "ERROR" not in first and "Traceback" not in first, first
    executed = [cell for cell in ran if cell.get("execution_count")]
    stopped = executed[-1]
    assert stopped.metadata["nbgrader"].get("grade"), "it stopped before the first check"
    assert "is not implemented yet" in text_of(stopped), text_of(stopped)
    errors = [cell.metadata.get("nbgrader", {}).get("grade_id") for cell in executed[:-1]
              if any(output.output_type == "error" for output in cell.outputs)]
    assert errors == [], errors
    assert "ModuleNotFoundError" not in "".join(map(text_of, executed))
    assert (tmp_path / "home" / "gpu-course" / "course_utils").is_dir()
