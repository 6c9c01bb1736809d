"""The learner lab's Validate button, pressed in a real browser on two lessons: one solved, one
with its exercises still to do. Each answers with a result a learner can act on: that the
notebook passes, or each failing check's message; never nbgrader's "error running the validate
command" and a traceback (walkthrough r4 M1; nbgrader_config.py sets Validate's limits).

Its own file, so that a test worker runs it beside tests/test_browser.py; it starts one
`make lab` and reuses that file's helpers (a copy of the course, the lab, Debian's chromium).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import pytest

from .test_browser import (
    CHROMIUM,
    CHROMIUM_FLAGS,
    LOCAL_HOSTS,
    Lab,
    Steps,
    _browser_or_skip,
    copy_course,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

SOLVED = ("00_setup", "setup.ipynb")
UNSOLVED = ("01_tensors_devices", "tensors_devices.ipynb")
# Validate reruns the whole lesson in a new kernel: 15 to 20 s each on a quiet 2-core VM.
VALIDATE_WAIT_MS = 240_000


def solve_release(course: Path, lesson: str, notebook: str) -> None:
    """The learner's copy of a lesson with every answer written: the release, each solution
    cell's text taken from solutions/ (checksums and locked cells as released)."""
    release = course / "notebooks" / lesson / notebook
    nb = nbformat.read(release, as_version=4)
    answers = {cell.metadata["nbgrader"]["grade_id"]: cell.source
               for cell in nbformat.read(course / "solutions" / lesson / notebook,
                                         as_version=4).cells
               if cell.metadata.get("nbgrader", {}).get("solution")}
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = answers[cell.metadata["nbgrader"]["grade_id"]]
    nbformat.write(nb, release)


def press_validate(page, lab: Lab, lesson: str, notebook: str) -> tuple[str, float]:
    """Open the lesson, press the toolbar's Validate, and return the result dialog's text and
    the seconds it took."""
    page.goto(lab.url(f"/lab/tree/{lesson}/{notebook}?reset"))  # this notebook alone
    page.locator(".lm-TabBar-tab.lm-mod-current", has_text=notebook).wait_for(timeout=60_000)
    button = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) jp-button",
                          has_text="Validate")
    button.wait_for(timeout=60_000)
    assert button.count() == 1
    started = time.monotonic()
    button.click()
    dialog = page.locator(".jp-Dialog", has_text="Validation Results")
    dialog.wait_for(timeout=VALIDATE_WAIT_MS)
    took = time.monotonic() - started
    text = dialog.locator(".jp-Dialog-body").inner_text()
    return text, took


def test_validate_answers_pass_or_the_failing_checks_message(tmp_path):
    """Checks Validate on a solved lesson says it passes, and on an unsolved one names each
    failing check with its message and fix, without a traceback."""
    sync_playwright = _browser_or_skip()
    course = copy_course(tmp_path / "course")
    solve_release(course, *SOLVED)
    steps = Steps(tmp_path / "screenshots")
    print(f"Screenshots of each step: {steps.folder}", file=sys.stderr)
    outside: list[str] = []

    def route(request_route):
        host = urlsplit(request_route.request.url).hostname or ""
        if request_route.request.url.startswith(("data:", "blob:")) or host in LOCAL_HOSTS:
            request_route.continue_()
        else:
            outside.append(request_route.request.url)
            request_route.abort()

    lab = None
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_FLAGS, viewport={"width": 1280, "height": 860})
        page = context.new_page()
        try:
            context.route("**/*", route)
            lab = Lab(course, "lab", tmp_path / "lab.log")

            solved, solved_took = press_validate(page, lab, *SOLVED)
            steps.shot(page, "validate-solved")
            assert "Success! Your notebook passes all the tests." in solved, solved
            page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept").click()

            unsolved, unsolved_took = press_validate(page, lab, *UNSOLVED)
            steps.shot(page, "validate-unsolved")
            for message in ("The following cell failed:", "checks.check_to_device(to_device)",
                            "✘ Check failed",
                            "to_device() is not implemented yet (it raises NotImplementedError).",
                            "How to fix it: replace `raise NotImplementedError()` with your"):
                assert message in unsolved, (message, unsolved)
            for wrong in ("Traceback", "error running the validate command", "Timeout"):
                assert wrong not in unsolved, (wrong, unsolved)
            print(f"Validate: {SOLVED[0]} solved {solved_took:.0f} s, {UNSOLVED[0]} unsolved "
                  f"{unsolved_took:.0f} s", file=sys.stderr)
        except BaseException:
            steps.shot(page, "failure")
            raise
        finally:
            if lab is not None:
                lab.stop()
            context.close()
    assert outside == [], f"requests to other hosts (aborted): {outside}"
