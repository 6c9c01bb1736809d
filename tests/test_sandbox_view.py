"""What a sandboxed process can read: nothing outside an allow-list, and not as root.

A process in the sandbox walks its whole file system (but /proc, /sys and /dev, and without
descending into the allowed trees) and reports every readable entry; the test fails on any
that is not allowed. It also runs the memory, process and output limits of
:func:`sandbox.run`, which the lesson-07 DDP check uses to launch a learner's script.
"""
from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from course_utils.grading import cgroups, confinement, sandbox
from course_utils.grading.records import Limits

WALK = textwrap.dedent("""
    import json, os, sys
    allowed = json.loads(sys.argv[1])
    skipped = ("/proc", "/sys", "/dev")
    def inside(path):
        return any(path == root or path.startswith(root.rstrip("/") + "/") for root in allowed)
    readable = []
    for folder, folders, files in os.walk("/"):
        if folder.startswith(skipped) or inside(folder):
            folders[:] = []
            continue
        for name in folders + files:
            path = os.path.join(folder, name)
            if not inside(path) and not path.startswith(skipped) and os.access(path, os.R_OK) \\
                    and not os.path.isdir(path):
                readable.append(path)
    etc = sorted(os.listdir("/etc"))
    print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "readable": readable,
                      "etc": etc, "top": sorted(os.listdir("/")),
                      "root": sorted(os.listdir("/root")) if os.path.isdir("/root") else []}))
""")


@pytest.fixture(scope="module")
def view(tmp_path_factory, grading_sandbox):
    scratch = tmp_path_factory.mktemp("view")
    (scratch / "walk.py").write_text(WALK)
    etc = (*confinement.HOST_ETC, *confinement.SYNTHETIC_ETC)
    allowed = [*confinement.SYSTEM_FOLDERS, *map(str, confinement.python_folders()),
               str(scratch), "/tmp", *(f"/etc/{name}" for name in etc)]
    done = sandbox.run([sys.executable, "walk.py", json.dumps(allowed)], scratch=scratch,
                       timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_sandboxed_process_reads_only_what_is_allowed(view):
    """Checks every readable file in the sandbox is under the allow-list (system folders,
    Python, the course package, the synthesised /etc, its scratch folder and /tmp)."""
    assert view["readable"] == []


def test_no_home_root_var_or_etc_secrets(view):
    """Checks /home and /var do not exist inside, /root holds only the way to a Python
    installed there (pyenv), and /etc holds only the allowed names (no shadow, shadow-,
    gshadow-, sudoers, ssh keys)."""
    assert not {"home", "var", "srv", "mnt"} & set(view["top"]), view["top"]
    to_python = {folder.relative_to("/root").parts[0] for folder in confinement.python_folders()
                 if Path("/root") in folder.parents}
    assert set(view["root"]) <= to_python, view["root"]
    assert set(view["etc"]) <= {*confinement.HOST_ETC, *confinement.SYNTHETIC_ETC}, view["etc"]
    assert "shadow-" not in view["etc"] and "passwd-" not in view["etc"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the switch of user applies when grading as root")
def test_student_code_runs_unprivileged_when_the_grader_is_root(view):
    """Checks the command runs as uid/gid 65534, not root."""
    assert (view["uid"], view["gid"]) == (65534, 65534)


def test_run_holds_memory_processes_and_output_for_the_whole_sandbox(tmp_path, grading_sandbox):
    """Checks sandbox.run (the DDP check's launcher) caps memory over several processes,
    keeps only the first bytes of a flood, and leaves no process behind."""
    if not cgroups.detect().enforced:
        pytest.skip(cgroups.detect().problem)
    token = "1234567.75"
    script = textwrap.dedent(f"""
        import subprocess, sys
        subprocess.Popen(['sleep', '{token}'], start_new_session=True)
        hold = ("b = bytearray(400 * 2**20); b[::4096] = bytes(len(b[::4096])); "
                "import time; time.sleep(3)")
        children = [subprocess.Popen([sys.executable, '-c', hold]) for _ in range(4)]
        print([child.wait() for child in children])
        sys.stdout.write('x' * 5_000_000)
    """)
    (tmp_path / "attack.py").write_text(script)
    done = sandbox.run([sys.executable, "attack.py"], scratch=tmp_path, timeout=60,
                       limits=Limits(memory_mb=768, output_bytes=10_000))
    assert "the memory limit killed" in done.refused, done
    assert -9 in json.loads(done.stdout.splitlines()[0])
    assert len(done.stdout) <= 10_000
    assert not any(token.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
                   for pid in os.listdir("/proc") if pid.isdigit()
                   and Path(f"/proc/{pid}/cmdline").exists())
