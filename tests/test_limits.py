"""Grading limits are declared once, in grading.records.Limits, and every seam reads them there:
the launcher's options (limited.py, which cannot import the record), the grading kernel's
command, `course grade`'s options and help, and the summary line a run prints."""
from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import resource
import subprocess
import sys

import pytest

from course_utils.grading import cgroups, limited
from course_utils.grading.launcher import limited_argv
from course_utils.grading.records import Limits, command_line_limits, spec_of
from course_utils.grading.request import (
    GradeRequest,
    IsolationChosen,
    LimitsChosen,
    SubmissionRecorded,
    describe_limits,
)
from course_utils.grading.session import KernelRecipe, kernel_command
from course_utils.tools.cli import build_parser

from .conftest import ROOT

# Every limit away from its default, so that a value read from the wrong place shows.
ODD = Limits(cell_timeout=7.5, submission_timeout=33.0, memory_mb=700, max_processes=77,
             max_open_files=99, output_bytes=1234, total_output_bytes=5678,
             max_notebook_mb=3.5, startup_timeout=11.0, max_file_mb=3)
PER_PROCESS = [limit for limit in dataclasses.fields(Limits) if spec_of(limit).per_process]


def _launcher_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(exit_on_error=False)
    limited.add_rlimit_arguments(parser)
    return parser


def test_the_launcher_takes_exactly_the_options_the_record_gives_with_its_defaults():
    """Checks limited.py's rlimit options are the record's per-process caps, one each, named
    after the field, with the field's default; and that it reads back every value given."""
    parser = _launcher_parser()
    assert vars(parser.parse_args([])) == {limit.name: limit.default for limit in PER_PROCESS}
    assert vars(parser.parse_args(ODD.launcher_options())) == {
        limit.name: getattr(ODD, limit.name) for limit in PER_PROCESS}
    assert vars(parser.parse_args(Limits().launcher_options())) == vars(parser.parse_args([]))


def test_the_launcher_sets_each_cap_in_the_command_it_starts(tmp_path):
    """Checks the launcher, run as the grader runs it (-I -S: no site-packages), sets the
    record's rlimits and no core dumps in the command it starts."""
    report = ("import json, resource\n"
              "print(json.dumps({name: resource.getrlimit(getattr(resource, name))[0] for name "
              "in ('RLIMIT_DATA', 'RLIMIT_NOFILE', 'RLIMIT_FSIZE', 'RLIMIT_CORE')}))")
    done = subprocess.run(limited_argv([sys.executable, "-I", "-S", "-c", report], ODD),
                          capture_output=True, text=True, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"RLIMIT_DATA": 700 * 2**20, "RLIMIT_NOFILE": 99,
                                       "RLIMIT_FSIZE": 3 * 2**20, "RLIMIT_CORE": 0}


def test_no_memory_cap_leaves_data_memory_as_it_is(tmp_path):
    """Checks --memory-mb 0 (a CUDA machine without cgroups) sets no data-memory rlimit."""
    report = "import resource; print(resource.getrlimit(resource.RLIMIT_DATA)[0])"
    done = subprocess.run(limited_argv([sys.executable, "-I", "-S", "-c", report],
                                       Limits(memory_mb=0)),
                          capture_output=True, text=True, check=False, cwd=tmp_path)
    assert int(done.stdout) == resource.getrlimit(resource.RLIMIT_DATA)[0], done.stderr


def test_the_kernel_command_carries_the_same_launcher_options():
    """Checks the grading kernel's command passes the record's launcher options, which the
    kernel's parser (limited.py's, as kernel.py builds it) reads back as the record."""
    argv = kernel_command(KernelRecipe(ODD, {}), None)
    options = ODD.launcher_options()
    start = argv.index(options[0])
    assert argv[start:start + len(options)] == options
    parser = argparse.ArgumentParser()
    limited.add_arguments(parser)
    parsed, _ = parser.parse_known_args(argv[3:])
    assert all(getattr(parsed, limit.name) == getattr(ODD, limit.name) for limit in PER_PROCESS)


def _grade_help() -> str:
    commands = next(action for action in build_parser()._actions
                    if isinstance(action, argparse._SubParsersAction))
    return " ".join(commands.choices["grade"].format_help().split())


def test_course_grade_lists_every_limit_with_its_unit_and_default():
    """Checks `course grade --help` has an option per limit with a flag, each with its help,
    unit and default from the record, and no option for the internal ones."""
    text = _grade_help()
    for limit in dataclasses.fields(Limits):
        spec = spec_of(limit)
        if spec.flag is None:
            assert "--" + limit.name.replace("_", "-") not in text
            continue
        assert spec.flag in text and spec.option_help(limit.default) in text
    assert "default: 4096 MiB (0: no cap)" in text and "default: 512 processes" in text


def test_course_grade_options_build_the_record():
    """Checks the options `course grade` parses become a Limits with those values, and the
    defaults become the record's defaults."""
    flags = [word for limit in command_line_limits()
             for word in (spec_of(limit).flag, str(getattr(ODD, limit.name)))]
    from course_utils.tools.cli import _limits_from

    given = _limits_from(build_parser().parse_args(["grade", "folder", *flags]))
    assert given == dataclasses.replace(ODD, startup_timeout=Limits().startup_timeout,
                                        max_file_mb=Limits().max_file_mb)
    assert _limits_from(build_parser().parse_args(["grade", "folder"])) == Limits()


def test_the_summary_names_the_caps_the_launcher_and_the_group_set():
    """Checks the line a run prints names each rlimit the launcher sets (RLIMIT_DATA is data
    memory, not the address space), no core dumps, and the control group's caps."""
    v1 = cgroups.ResourceControl(cgroups.Backend.V1, "v1", roots=("/a", "/b", "/c"))
    line = describe_limits(v1, ODD, 2)
    assert "address space," not in line and "of address space" not in line
    for cap in ("700 MiB of data memory (RLIMIT_DATA", "99 open files (RLIMIT_NOFILE)",
                "files of at most 3 MiB (RLIMIT_FSIZE)", "no core dumps",
                "700 MiB of memory (shared memory and tmpfs included)",
                "77 processes and threads", "an equal CPU share among 2 worker(s)"):
        assert cap in line, line
    unsafe = describe_limits(cgroups.UNSAFE, Limits(memory_mb=0), 1)
    assert "Per process only: no data-memory cap, 1024 open files" in unsafe
    assert "processes and threads" not in unsafe  # no group: no process cap


@pytest.mark.slow
def test_a_run_tells_its_caller_what_holds_then_each_result(tmp_path):
    """Checks grade() sends one typed event per step: the isolation, the limits (the summary
    of the request's own limits), then each result recorded, counted."""
    student = tmp_path / "submissions" / "alex" / "00_setup"
    student.mkdir(parents=True)
    (student / "setup.ipynb").symlink_to(ROOT / "solutions" / "00_setup" / "setup.ipynb")
    from course_utils.grading.runner import grade

    heard = []
    request = GradeRequest(ROOT, tmp_path / "submissions", tmp_path / "out", jobs=1, seed=3,
                           limits=Limits(max_open_files=321), use_sandbox=False,
                           use_limits=False)
    outcome = grade(request, on_event=heard.append)
    assert [type(event) for event in heard] == [IsolationChosen, LimitsChosen,
                                                 SubmissionRecorded]
    assert not heard[0].isolation.sandboxed and "321 open files" in heard[1].summary
    assert heard[2].line == "[1/1] alex 00_setup: 0/6 invalid"
    assert [row.status.value for row in outcome.rows] == ["invalid"]


def test_a_sandboxed_command_has_no_defaults_of_its_own():
    """Checks sandbox.run's limits default to the record's (it once had its own: 256
    processes where `course grade` gave 512)."""
    from course_utils.grading import sandbox

    assert inspect.signature(sandbox.run).parameters["limits"].default == Limits()


@pytest.mark.parametrize("field_name", [limit.name for limit in dataclasses.fields(Limits)])
def test_every_limit_says_what_it_bounds_and_in_what(field_name):
    """Checks each limit declares its help and unit, and names itself in the error for a
    bad value (its flag, or its field name when it has none)."""
    limit = next(limit for limit in dataclasses.fields(Limits) if limit.name == field_name)
    spec = spec_of(limit)
    assert spec.help and spec.unit
    with pytest.raises(ValueError, match=f"^{spec.flag or field_name} must be"):
        Limits(**{field_name: -1})
