"""The CI workflow: the self-hosted GPU runner serves only trusted code; CPU runs every change."""
from __future__ import annotations

import re

import pytest
import yaml

from .conftest import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"


@pytest.fixture(scope="module")
def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text())


def triggers(workflow: dict) -> dict:
    # YAML 1.1 reads the key `on` as the boolean True.
    return workflow.get("on", workflow.get(True))


def job_condition(job: dict) -> str:
    return re.sub(r"\s+", " ", str(job.get("if", ""))).strip()


def test_triggers_are_push_pull_request_and_manual(workflow):
    """Checks the triggers: pushes, every pull request, by hand; never pull_request_target."""
    on = triggers(workflow)
    assert {"push", "pull_request", "workflow_dispatch"} <= set(on)
    # pull_request_target runs with the base repository's secrets on a fork's event.
    assert "pull_request_target" not in on and "workflow_run" not in on
    assert not (on["pull_request"] or {}).get("branches"), "the CPU job runs on every pull request"


def test_cpu_job_runs_on_every_change_on_a_hosted_runner(workflow):
    """Checks the CPU job has no condition and runs on GitHub's own runner."""
    cpu = workflow["jobs"]["cpu"]
    assert "if" not in cpu
    assert cpu["runs-on"] == "ubuntu-latest"
    assert any("bash .ci/run" in step.get("run", "") for step in cpu["steps"])


def test_the_cuda_build_runs_on_a_hosted_runner_without_a_driver(workflow):
    """Checks a job runs the suite on PyPI's CUDA build of torch, on GitHub's own runner."""
    job = workflow["jobs"]["cuda-build-no-driver"]
    assert job["runs-on"] == "ubuntu-latest" and "if" not in job
    commands = [step.get("run") for step in job["steps"]]
    assert "CI_MAKE_TARGET=test-cuda-build bash .ci/run" in commands


def test_the_version_matrix_is_the_declared_range(workflow):
    """Checks CI tests the ends of pyproject's torch range, and make test the locked one."""
    import tomllib
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = next(Requirement(line).specifier for line in project["dependencies"]
                    if Requirement(line).name == "torch")
    matrix = workflow["jobs"]["torch-versions"]["strategy"]["matrix"]["torch"]
    locked = re.search(r"^torch==(\S+)$", (ROOT / "requirements.lock").read_text(), re.MULTILINE)[1]
    tested = sorted([*matrix, locked], key=lambda v: tuple(map(int, v.split("."))))
    assert all(version in declared for version in tested), (tested, str(declared))
    oldest, newest = tested[0], tested[-1]
    assert str(declared) == f"<{int(newest.split('.')[0])}.{int(newest.split('.')[1]) + 1}," \
                            f">={'.'.join(oldest.split('.')[:2])}", "declare what is tested"
    assert "CI_MAKE_TARGET=test-torch TORCH=${{ matrix.torch }}" in \
        workflow["jobs"]["torch-versions"]["steps"][-1]["run"]
    assert workflow["jobs"]["torch-versions"]["steps"][-1]["run"].endswith("bash .ci/run")


def versions_left_out(makefile: str) -> list[str]:
    """The tests `make test-torch` leaves out: its VERSIONS_LEFT_OUT's --ignore/--deselect."""
    block = re.search(r"^VERSIONS_LEFT_OUT := ((?:.*\\\n)*.*)$", makefile, re.MULTILINE)[1]
    return re.findall(r"--(?:ignore|deselect)=(\S+)", block)


def test_every_test_the_version_runs_leave_out_exists_and_has_its_reason():
    """Checks each test make test-torch leaves out exists and docs/pytorch-versions.md says why.

    pytest ignores an --ignore or --deselect that names nothing, so a renamed test would
    silently run (or a stale exclusion linger) without this.
    """
    left_out = versions_left_out((ROOT / "Makefile").read_text())
    assert len(left_out) >= 4 and "tests/test_browser.py" in left_out
    docs = (ROOT / "docs" / "pytorch-versions.md").read_text()
    reasons = docs.split("## Left out of the version runs")[1].split("\n## ")[0]
    for test in left_out:
        path, _, name = test.partition("::")
        assert (ROOT / path).is_file(), f"{test}: no such file"
        assert not name or re.search(rf"^def {name}\(", (ROOT / path).read_text(), re.MULTILINE), \
            f"{test}: no such test"
        assert f"`{test}`" in reasons, f"{test}: say in docs/pytorch-versions.md why it is left out"


def test_versions_left_out_reads_the_makefile_block():
    """Checks the parser finds every continued line of the block and nothing after it."""
    makefile = ("VERSIONS_LEFT_OUT := \\\n\t--ignore=tests/a.py \\\n"
                "\t--deselect=tests/b.py::test_c\nOTHER := --ignore=tests/d.py\n")
    assert versions_left_out(makefile) == ["tests/a.py", "tests/b.py::test_c"]


def test_gpu_job_runs_only_trusted_code(workflow):
    """Checks self-hosted jobs run only for the default branch, by hand, or same-repo PRs."""
    self_hosted = {name: job for name, job in workflow["jobs"].items()
                   if "self-hosted" in job["runs-on"]}
    assert set(self_hosted) == {"gpu"}
    condition = job_condition(self_hosted["gpu"])
    clauses = [clause.strip().removeprefix("(").removesuffix(")")
               for clause in condition.split("||")]
    assert len(clauses) == 3, condition
    push, manual, pull_request = clauses
    assert "github.event_name == 'push'" in push
    assert "github.ref == format('refs/heads/{0}', github.event.repository.default_branch)" in push
    assert manual == "github.event_name == 'workflow_dispatch'"
    assert "github.event_name == 'pull_request'" in pull_request
    assert "github.event.pull_request.head.repo.full_name == github.repository" in pull_request


def test_gpu_job_verifies_the_course_and_uploads_the_reference_run(workflow):
    """Checks the GPU job runs make gpu-wheels, then make gpu-check, and uploads the run."""
    steps = workflow["jobs"]["gpu"]["steps"]
    commands = [step.get("run", "").split(" ")[:2] for step in steps]
    assert commands.index(["make", "gpu-wheels"]) < commands.index(["make", "gpu-check"])
    upload = next(step for step in steps
                  if step.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["with"]["path"].rstrip("/") == "docs/reference-runs"
    assert upload.get("if") == "always()", "the reference run is kept when a check fails too"
