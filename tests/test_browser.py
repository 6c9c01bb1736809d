"""The course in a real browser: a learner's lab, then an instructor's formgrader and grades.

Debian's chromium (``/usr/bin/chromium``, installed by ``.ci/run``), driven by Playwright's
Python package; Playwright never downloads a browser here. Everything runs in a temporary
copy of the course (its default ``grading-output/`` included), on free ports, so two test
workers never share a file or a port. Every request the browser makes to a host other than
this machine is aborted and counted: there must be none (the course works offline).

Screenshots of each step go to a folder printed on failure. With
``COURSE_DOC_SCREENSHOTS=1`` the steps that docs/instructor.md shows are also saved into
``docs/images/`` (how those images are made).
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import pytest

from .conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]
LOCAL_HOSTS = {"localhost", "127.0.0.1", "[::1]", "::1"}
DOC_IMAGES = ROOT / "docs" / "images"
LESSON, NOTEBOOK = "00_setup", "setup.ipynb"
WRITTEN = "hardcoded_cuda"  # lesson 00's written answer (2 points, graded by hand)
ROSTER = [("alice", "Alice", "Archer"), ("bob", "Bob", "Baker"), ("carol", "Carol", "Cooper")]
HAND_SCORE, HAND_COMMENT = "1.5", "Right for the laptop; say what the CUDA error names."


def _browser_or_skip():
    """Playwright's sync API, or a skip (a failure under CI) saying what is missing."""
    reason = os.environ.get("COURSE_BROWSER_UNAVAILABLE")
    if reason:  # .ci/run tried to install chromium and could not
        pytest.skip(f"no browser: {reason}")
    if not CHROMIUM.exists():
        message = ("needs Debian's chromium at /usr/bin/chromium "
                   "(sudo apt-get install chromium; .ci/run installs it)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    return sync_playwright


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def copy_course(target: Path) -> Path:
    """The course's files (tracked and new, as git lists them), times kept, sharing .venv."""
    # The copy's `make lab` would otherwise reinstall into the shared .venv, pointing its
    # editable install, `course` command and kernel at this temporary copy.
    if subprocess.run(["make", "-q", "install"], cwd=ROOT, check=False).returncode:
        pytest.fail("the course's .venv is older than pyproject.toml or requirements.lock: run "
                    "`make install` first (`make test` does)")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    for name in listed.stdout.decode().split("\0"):
        source = ROOT / name
        if name and source.is_file() and not source.is_symlink():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)  # times kept: make sees .venv up to date
    (target / ".venv").symlink_to(ROOT / ".venv")
    return target


class Lab:
    """`make lab` or `make instructor` in the course copy, on a free port, with a token."""

    def __init__(self, course: Path, target: str, log: Path):
        self.port, self.token = free_port(), "browser-test"
        # A workspace of its own: JupyterLab otherwise keeps the open notebooks in one file
        # under the home folder, and another test's lab (on another worker) reopens them.
        flags = (f"--no-browser --port={self.port} --ServerApp.ip=127.0.0.1 "
                 f"--IdentityProvider.token={self.token} --ServerApp.port_retries=0 "
                 f"--LabApp.workspaces_dir={log.parent / (log.stem + '-workspaces')}")
        self.log = log
        with log.open("w") as output:  # the child keeps its own copy of the descriptor
            self.process = subprocess.Popen(
                ["make", "--no-print-directory", target, f"LAB_FLAGS={flags}"], cwd=course,
                stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "JUPYTER_PLATFORM_DIRS": "1"})
        self._wait()

    def url(self, path: str) -> str:
        joiner = "&" if "?" in path else "?"
        return f"http://127.0.0.1:{self.port}{path}{joiner}token={self.token}"

    def _wait(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the lab exited:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(self.url("/api/status"), timeout=2):
                    return
            except OSError:
                time.sleep(0.3)
        raise AssertionError(f"the lab did not start:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


class Steps:
    """Numbered screenshots of each step; some also kept for docs/instructor.md."""

    def __init__(self, folder: Path):
        self.folder, self.count = folder, 0
        folder.mkdir(parents=True, exist_ok=True)
        self.for_docs = bool(os.environ.get("COURSE_DOC_SCREENSHOTS"))

    def shot(self, page, name: str, doc: str | None = None) -> None:
        self.count += 1
        page.screenshot(path=str(self.folder / f"{self.count:02d}-{name}.png"))
        if doc and self.for_docs:
            DOC_IMAGES.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(DOC_IMAGES / f"{doc}.png"))


def grade(course: Path, sandboxed: bool) -> subprocess.CompletedProcess:
    """`course grade` as the instructor runs it, into the default grading-output/."""
    command = [str(course / ".venv" / "bin" / "course"), "grade", "submissions", "--lesson",
               LESSON, "--roster", "students.csv", "--jobs", "2", "--seed", "7"]
    if not sandboxed:  # the test's own, trusted submissions
        command.append("--unsafe-no-sandbox")
    done = subprocess.run(command, cwd=course, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def write_submissions(course: Path) -> None:
    """Three students: two solved the lesson, one handed in the blank release."""
    solved = nbformat.read(course / "solutions" / LESSON / NOTEBOOK, as_version=4)
    blank = nbformat.read(course / "notebooks" / LESSON / NOTEBOOK, as_version=4)
    for student, nb in (("alice", solved), ("bob", blank), ("carol", solved)):
        folder = course / "submissions" / student / LESSON
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / NOTEBOOK)
    with (course / "students.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "first_name", "last_name", "email"])
        writer.writerows([*row, f"{row[0]}@example.org"] for row in ROSTER)


def wait_for_notebook_kernel(page, notebook: Path) -> None:
    """Wait until the lab has started, by itself, the kernel the notebook names, and it is idle.

    The toolbar's execution indicator cannot tell: it reads "idle" from the moment it is drawn,
    before the lab has asked for any kernel. Run All before the kernel is up runs every code
    cell at once against no kernel. JupyterLab's default then has each cell ask for a kernel of
    its own; while the lab is still writing the notebook's first checkpoint it has not read the
    kernel the notebook names yet, so each of the lesson's 15 code cells opens a Select Kernel
    dialog, queued one behind the other, and each one accepted starts the kernel again (seen in
    CI on a loaded machine: the dialog "stayed open" after its Select button was clicked). The
    course's labs refuse such a run with one notice instead (jupyter/lab-settings), and nothing
    runs. The status bar's kernel item reads "<kernel> | Idle" only once the kernel is connected
    and idle.
    """
    from playwright.sync_api import expect

    display_name = nbformat.read(notebook, as_version=4).metadata.kernelspec.display_name
    kernel_status = page.locator("#jp-main-statusbar .jp-StatusBar-TextItem", has_text=" | ")
    expect(kernel_status).to_have_text(f"{display_name} | Idle", timeout=120_000)


def lab_setting_default(lab: Lab, plugin: str, key: str):
    """The default the lab gives one of JupyterLab's settings (before a user's own settings)."""
    with urllib.request.urlopen(lab.url(f"/lab/api/settings/{plugin}"), timeout=30) as answer:
        return json.load(answer)["schema"]["properties"][key].get("default")


def assert_no_kernel_choice(page) -> None:
    """The lab must start the kernel the notebook names without asking the learner."""
    asked = page.locator(".jp-Dialog", has_text="Select Kernel")
    assert not asked.count(), ("JupyterLab asked which kernel to start: "
                               f"{asked.first.inner_text()!r}")


def save_field(page, field, value: str, api: str) -> None:
    """Type ``value`` into a formgrader field and leave it; wait for the PUT that saves it.
    An edit made before formgrader bound the field is not sent (seen once in CI): type again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(3):
        try:
            with page.expect_response(lambda r: api in r.url and r.request.method == "PUT",
                                      timeout=15_000) as saved:
                field.fill("")
                field.fill(value)
                field.press("Tab")
            assert saved.value.ok, saved.value.status
            return
        except PlaywrightTimeout:
            if attempt == 2:
                raise


def run_all_cells(page, saved: Path) -> nbformat.NotebookNode:
    """Run → Run All Cells, wait for the kernel, save; the notebook as the lab saved it."""
    wait_for_notebook_kernel(page, saved)
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        page.get_by_role("menuitem", name="Run", exact=True).click(timeout=10_000)
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click(timeout=10_000)
        time.sleep(1)
        assert_no_kernel_choice(page)
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']",
                               timeout=120_000)
        page.keyboard.press("Control+s")
        page.wait_for_selector(".jp-StatusBar-Widget:has-text('Saving completed')",
                               timeout=30_000)
        nb = nbformat.read(saved, as_version=4)
        if all(cell.execution_count for cell in nb.cells if cell.cell_type == "code"):
            return nb
    raise AssertionError("the notebook's cells did not all run within 150 s")


def test_learner_and_instructor_in_a_real_browser(tmp_path, grading_sandbox_or_none):
    """Checks a learner runs lesson 00 in `make lab`, then formgrader and hand grading work."""
    sync_playwright = _browser_or_skip()
    course = copy_course(tmp_path / "course")
    steps = Steps(tmp_path / "screenshots")
    outside: list[str] = []
    labs: list[Lab] = []
    print(f"Screenshots of each step: {steps.folder}", file=sys.stderr)

    def route(request_route):
        host = urlsplit(request_route.request.url).hostname or ""
        if request_route.request.url.startswith(("data:", "blob:", "file:")) or host in LOCAL_HOSTS:
            request_route.continue_()
        else:
            outside.append(request_route.request.url)
            request_route.abort()

    # The learner has finished lesson 00: their copy holds the answers.
    release = course / "notebooks" / LESSON / NOTEBOOK
    release_text = release.read_text()
    shutil.copy2(course / "solutions" / LESSON / NOTEBOOK, release)
    started = time.monotonic()
    with sync_playwright() as playwright:
        # A fresh profile folder (Playwright passes it as --user-data-dir).
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_FLAGS, viewport={"width": 1280, "height": 860})
        try:
            context.route("**/*", route)
            page = context.new_page()

            # 1. The learner's lab: lesson 00, run every cell.
            labs.append(Lab(course, "lab", tmp_path / "lab.log"))
            # Run All while the kernel starts: one notice, not a dialog per code cell.
            assert lab_setting_default(labs[-1], "@jupyterlab/notebook-extension:tracker",
                                       "enableKernelInitNotification") is True
            page.goto(labs[-1].url(f"/lab/tree/{LESSON}/{NOTEBOOK}"))
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            nb = run_all_cells(page, release)
            outputs = {cell.metadata.get("nbgrader", {}).get("grade_id"): cell.outputs
                       for cell in nb.cells if cell.cell_type == "code"}
            errors = [output for cell_outputs in outputs.values() for output in cell_outputs
                      if output.output_type == "error"]
            assert errors == [], [f"{e.ename}: {e.evalue}" for e in errors]
            for grade_id in ("test_pick_device", "test_gpu_inventory"):  # the visible checks
                lines = "".join(o.get("text", "") for o in outputs[grade_id]).splitlines()
                assert lines and all(line.startswith("✔ ") for line in lines), (grade_id, lines)
            # What the learner sees: the first check's success line, under its cell.
            check = page.locator(".jp-CodeCell", has_text="checks.check_pick_device").first
            check.scroll_into_view_if_needed()
            assert "✔" in check.locator(".jp-OutputArea").inner_text()
            steps.shot(page, "learner-ran-lesson-00", doc="learner-lab")
            menus = page.locator(".lm-MenuBar-content").inner_text()
            assert "Nbgrader" in menus  # the learner's tools: assignment list, validate
            page.get_by_role("menuitem", name="Nbgrader", exact=True).click()
            items = page.locator(".lm-Menu-content").inner_text()
            assert "Assignment List" in items and "Formgrader" not in items, items
            page.keyboard.press("Escape")
            labs.pop().stop()
            release.write_text(release_text)  # the release again, as graded against

            # 2. The instructor's lab: formgrader opens before any grading.
            labs.append(Lab(course, "instructor", tmp_path / "instructor.log"))
            lab = labs[-1]
            page.goto(lab.url("/formgrader"))
            row = page.locator("tr", has=page.locator("td", has_text=LESSON)).first
            row.wait_for(timeout=30_000)
            assert row.locator(".num-submissions").inner_text().strip() == "0"
            steps.shot(page, "formgrader-before-grading", doc="formgrader-empty")

            # 3. Grade three submissions with a roster, into the default grading-output/.
            write_submissions(course)
            grade(course, grading_sandbox_or_none)
            page.goto(lab.url("/formgrader"))
            row = page.locator("tr", has=page.locator("td", has_text=LESSON)).first
            row.wait_for(timeout=30_000)
            page.wait_for_function(
                "() => [...document.querySelectorAll('.num-submissions')]"
                ".some(e => e.textContent.trim() === '3')", timeout=30_000)
            steps.shot(page, "formgrader-three-submissions", doc="formgrader-assignments")
            page.goto(lab.url(f"/formgrader/manage_submissions/{LESSON}"))
            page.wait_for_selector(".student-name", timeout=30_000)
            page.wait_for_function(
                "() => document.querySelectorAll('.student-name').length === 3")
            names = sorted(page.locator(".student-name").all_inner_texts())
            assert names == sorted(f"{last}, {first}" for _, first, last in ROSTER)
            steps.shot(page, "formgrader-names", doc="formgrader-submissions")

            # 4. A hand score and comment for Alice's written answer, through formgrader.
            page.goto(lab.url(f"/formgrader/gradebook/{LESSON}/{Path(NOTEBOOK).stem}"))
            alice = page.locator("a.name-shown", has_text="Archer, Alice")
            alice.wait_for(state="attached", timeout=30_000)
            page.goto(lab.url(alice.get_attribute("href")))
            score = page.locator(f"input.score#{WRITTEN}")
            score.wait_for(timeout=30_000)
            page.wait_for_load_state("networkidle")  # formgrader binds its fields after load
            save_field(page, score, HAND_SCORE, "/formgrader/api/grade/")
            comment = page.locator(f"textarea#{WRITTEN}-comment")
            save_field(page, comment, HAND_COMMENT, "/formgrader/api/comment/")
            score.scroll_into_view_if_needed()
            steps.shot(page, "hand-grade", doc="formgrader-hand-grade")

            # 5. Grade again: the hand score stays, and counts.
            grade(course, grading_sandbox_or_none)
            with (course / "grading-output" / "grades.csv").open(newline="") as handle:
                rows = {r["student"]: r for r in csv.DictReader(handle)}
            assert rows["alice"][WRITTEN] == HAND_SCORE
            assert float(rows["alice"]["score"]) == 4 + float(HAND_SCORE)
            assert "manual grading" not in rows["alice"]["reason"]
            assert rows["carol"][WRITTEN] == "" and "manual grading" in rows["carol"]["reason"]
            assert rows["alice"]["name"] == "Archer, Alice" and rows["alice"]["seed"] == "7"
            page.goto("file://" + str(course / "grading-output" / "feedback" / "alice"
                                      / f"{LESSON}.html"))
            assert HAND_COMMENT in page.inner_text("body")
            steps.shot(page, "feedback", doc="feedback")
            page.goto(lab.url(f"/formgrader/gradebook/{LESSON}/{Path(NOTEBOOK).stem}"))
            page.wait_for_selector("a.name-shown", state="attached", timeout=30_000)
            steps.shot(page, "formgrader-after-regrade")
        except BaseException:
            steps.shot(page, "failure")
            raise
        finally:
            for lab in labs:
                lab.stop()
            context.close()
    print(f"browser test: {time.monotonic() - started:.0f} s", file=sys.stderr)
    assert outside == [], f"requests to other hosts (aborted): {outside}"


@pytest.fixture
def grading_sandbox_or_none() -> bool:
    """Whether `course grade` can sandbox here (the test's own submissions need no sandbox)."""
    from course_utils.grading import sandbox

    return sandbox.detect().sandboxed
