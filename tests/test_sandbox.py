"""The bubblewrap sandbox, tried from inside: what a confined process can see, touch and kill."""
from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from course_utils.grading import confinement, sandbox
from course_utils.grading.records import Limits

from .conftest import ROOT

FACTS = textwrap.dedent("""
    import json, os, socket, pathlib, sys
    facts = {"pid": os.getpid(), "home": os.environ.get("HOME"), "cwd": os.getcwd(),
             "processes": len([p for p in os.listdir("/proc") if p.isdigit()]),
             "jpy_parent_pid": os.environ.get("JPY_PARENT_PID")}
    def attempt(name, action):
        try:
            action()
            facts[name] = "ok"
        except OSError as error:
            facts[name] = type(error).__name__ + ":" + str(error.errno)
    attempt("host_loopback", lambda: socket.create_connection(("127.0.0.1", int(sys.argv[4])), 2))
    attempt("internet", lambda: socket.create_connection(("1.1.1.1", 80), timeout=2))
    attempt("write_course", lambda: open(sys.argv[1] + "/Makefile", "a").close())
    attempt("write_package", lambda: open(sys.argv[2], "a").close())
    attempt("write_scratch", lambda: pathlib.Path("mine.txt").write_text("x"))
    attempt("write_tmp", lambda: pathlib.Path("/tmp/mine.txt").write_text("x"))
    attempt("kill_parent", lambda: os.kill(os.getppid(), 9))
    facts["hidden"] = sorted(os.listdir(sys.argv[3]))
    facts["solutions_visible"] = os.path.exists(sys.argv[1] + "/solutions")
    print(json.dumps(facts))
""")


@pytest.fixture
def scratch(tmp_path):
    folder = tmp_path / "scratch"
    folder.mkdir()
    return folder


def test_detect_finds_bubblewrap(grading_sandbox):
    """Checks the sandbox in force is bubblewrap and says what it gives."""
    assert grading_sandbox.sandboxed and grading_sandbox.version.startswith("bubblewrap")
    assert "PID" in grading_sandbox.description and grading_sandbox.problem == ""


def test_inside_the_sandbox(grading_sandbox, scratch, tmp_path):
    """Checks a confined process is alone, offline, read-only but for its scratch folder, and
    sees a hidden folder empty even where its parent folder is visible."""
    secret = ROOT / "course_utils" / "checks"  # visible (the package) yet hidden here
    with socket.create_server(("127.0.0.1", 0)) as server:  # listening on the host
        port = server.getsockname()[1]
        done = sandbox.run([sys.executable, "-c", FACTS, str(ROOT), str(ROOT / "pyproject.toml"),
                            str(secret), str(port)], scratch=scratch, timeout=60, hidden=[secret])
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert facts["processes"] <= 2  # bwrap's init and itself
    assert facts["pid"] <= 3
    assert facts["jpy_parent_pid"] is None
    assert facts["home"] == facts["cwd"] == str(scratch.resolve())
    assert facts["host_loopback"] == "ConnectionRefusedError:111"  # its own, empty loopback
    assert facts["internet"] == "OSError:101"  # ENETUNREACH: no interface but loopback
    assert facts["write_course"] == "OSError:30"  # EROFS
    assert facts["write_package"] == "OSError:30"
    assert facts["write_scratch"] == facts["write_tmp"] == "ok"
    # As root, the command runs as nobody and may not signal bwrap's init (root) at all;
    # otherwise the signal reaches that init, which ignores it.
    assert facts["kill_parent"] == ("PermissionError:1" if os.geteuid() == 0 else "ok")
    assert facts["hidden"] == []
    assert facts["solutions_visible"] is False  # the course root is not even mounted
    assert (scratch / "mine.txt").read_text() == "x"
    assert not (tmp_path / "mine.txt").exists()


def _alive(token: str) -> bool:
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if token.encode() in handle.read():
                    return True
        except OSError:
            pass
    return False


def test_the_timeout_kills_everything_started_inside(grading_sandbox, scratch):
    """Checks a process that detaches a child (setsid) cannot outlive the sandbox's timeout."""
    token = f"{os.getpid()}.25"
    script = (f"import subprocess, time\n"
              f"subprocess.Popen(['sleep', '{token}'], start_new_session=True)\n"
              "print('started', flush=True)\ntime.sleep(600)\n")
    started = time.monotonic()
    done = sandbox.run([sys.executable, "-c", script], scratch=scratch, timeout=5)
    assert done.timed_out and done.returncode is None
    assert done.stdout == "started\n"
    assert time.monotonic() - started < 30
    deadline = time.monotonic() + 5
    while _alive(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(token)


def test_unconfined_runs_with_the_limits_alone_and_its_timeout_ends_the_group(tmp_path):
    """Checks confined=False (--unsafe-no-sandbox) runs the command without bwrap, in the
    grader's view of the files, and its timeout still ends what it started."""
    token = f"{os.getpid()}.35"
    script = (f"import os, subprocess, time\n"
              f"subprocess.Popen(['sleep', '{token}'])\n"
              "print(os.path.exists(" + repr(str(ROOT / "solutions")) + "), flush=True)\n"
              "time.sleep(600)\n")
    done = sandbox.run([sys.executable, "-c", script], scratch=tmp_path, timeout=5,
                       confined=False, use_limits=False)
    assert done.timed_out and done.stdout == "True\n"  # no sandbox: the course is visible
    deadline = time.monotonic() + 5
    while _alive(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(token)


def test_limits_hold_inside(grading_sandbox, scratch):
    """Checks the memory cap fails an allocation inside, and output is cut at the cap."""
    script = ("try:\n    bytearray(2 * 2**30)\nexcept MemoryError:\n    print('capped')\n"
              "print('y' * 100_000)\n")
    done = sandbox.run([sys.executable, "-c", script], scratch=scratch, timeout=60,
                       limits=Limits(memory_mb=512, output_bytes=1000))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("capped\n") and len(done.stdout) == 1000


def test_the_memory_cap_leaves_mapped_libraries_alone(grading_sandbox, scratch):
    """Checks mapping more library than the cap works, while allocating past it fails.

    PyPI's CUDA build of torch maps about 3 GiB of CUDA libraries on import, with or without a
    driver: an address-space cap of 4 GiB made every lesson's kernel die or stall.
    """
    torch_dir = Path(importlib.util.find_spec("torch").origin).parent
    library = max((torch_dir / "lib").glob("*.so*"),
                  key=lambda path: path.stat().st_size)
    copies = 512 * 2**20 // library.stat().st_size + 1
    script = ("import mmap\n"
              f"with open({str(library)!r}, 'rb') as file:\n"
              f"    maps = [mmap.mmap(file.fileno(), 0, flags=mmap.MAP_PRIVATE, "
              f"prot=mmap.PROT_READ) for _ in range({copies})]\n"
              "print('mapped', sum(len(m) for m in maps) >> 20)\n"
              "try:\n    bytearray(1024 * 2**20)\nexcept MemoryError:\n    print('capped')\n")
    done = sandbox.run([sys.executable, "-c", script], scratch=scratch, timeout=60,
                       limits=Limits(memory_mb=512))
    assert done.returncode == 0, done.stderr
    mapped, capped = done.stdout.splitlines()
    assert int(mapped.split()[1]) > 512 and capped == "capped"


def test_the_argv_is_bubblewrap_with_every_namespace(tmp_path):
    """Checks the command line asks for PID, network, IPC and UTS namespaces, drops
    capabilities, dies with its parent, and binds the scratch folder last (on top)."""
    hidden = ROOT / "course_utils" / "checks"
    argv = confinement.bwrap_argv(["true"], confinement.Confinement(tmp_path, hidden=(hidden,)))
    for option in ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                   "--die-with-parent", "--new-session"):
        assert option in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert argv[-4:] == ["--chdir", str(tmp_path), "--", "true"]
    root_frozen = next(i for i, pair in enumerate(itertools.pairwise(argv))
                       if pair == ("--remount-ro", "/"))
    assert root_frozen > argv.index("--bind")
    assert argv.index("--bind") > argv.index(str(hidden)) > argv.index("--proc")
    assert argv[argv.index(str(hidden)) - 1] == "--tmpfs"
    # A folder outside everything visible needs no cover.
    assert str(ROOT / "solutions") not in confinement.bwrap_argv(
        ["true"], confinement.Confinement(tmp_path, hidden=(ROOT / "solutions",)))


def test_without_bwrap_the_error_says_how_to_install_it(tmp_path):
    """Checks require() names the package to install when bwrap is not on PATH."""
    done = subprocess.run(
        [sys.executable, "-c", "from course_utils.grading import sandbox; sandbox.require()"],
        env={**os.environ, "PATH": str(tmp_path)}, capture_output=True, text=True,
        check=False)
    assert done.returncode != 0
    assert "SandboxUnavailable: No grading sandbox: bwrap was not found on PATH" in done.stderr
    assert "sudo apt-get install bubblewrap" in done.stderr
    assert "--unsafe-no-sandbox" in done.stderr


@pytest.mark.slow
def test_torchrun_runs_two_ranks_inside(grading_sandbox, scratch):
    """Checks a learner's DDP script runs under torchrun (gloo, 2 ranks) in the sandbox."""
    (scratch / "ddp.py").write_text(textwrap.dedent("""
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        value = torch.tensor([float(dist.get_rank() + 1)])
        dist.all_reduce(value)
        print(f"rank {dist.get_rank()} of {dist.get_world_size()}: sum {value.item():g}")
        dist.destroy_process_group()
    """))
    done = sandbox.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc_per_node=2", "ddp.py"], scratch=scratch, timeout=120,
                       env={**sandbox.default_env(scratch), "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    # Both ranks print to one file: their lines may interleave.
    assert sorted(re.findall(r"rank (\d) of 2: sum 3", done.stdout)) == ["0", "1"], done.stdout


def test_a_folder_under_tmp_stays_readable_and_tmp_private(grading_sandbox, scratch, tmp_path):
    """Checks a readable folder under /tmp (a course cloned there: CI) is seen inside, on top of
    the sandbox's private /tmp, that nothing can be written beside it, while the rest of the
    host's /tmp is not seen and the private /tmp stays writable."""
    course = tmp_path / "course"
    course.mkdir()
    (course / "lesson.txt").write_text("seen")
    (tmp_path / "beside.txt").write_text("secret")
    assert str(course).startswith("/tmp/")
    script = textwrap.dedent(f"""
        import os
        def write(path):
            try:
                open(path, "a").close()
                return "ok"
            except OSError as error:
                return f"OSError:{{error.errno}}"
        print(open({str(course / 'lesson.txt')!r}).read(),
              os.path.exists({str(tmp_path / 'beside.txt')!r}),
              write({str(course / 'new.txt')!r}), write({str(tmp_path / 'beside-new.txt')!r}),
              write("/tmp/mine.txt"))
    """)
    done = sandbox.run([sys.executable, "-c", script], scratch=scratch, timeout=60,
                       readable=[course])
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["seen", "False", "OSError:30", "OSError:30", "ok"]


def test_no_user_namespace_can_be_made_inside(grading_sandbox, scratch):
    """Checks the syscall filter (where libseccomp is installed) refuses a new user namespace
    (unshare and clone with CLONE_NEWUSER), while threads and forked children still work."""
    if not grading_sandbox.syscall_filter:
        pytest.skip(f"no syscall filter here: {grading_sandbox.description}")
    assert "syscall filter: no user namespaces" in grading_sandbox.description
    code = ("import ctypes, os, threading\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "print(libc.unshare(0x10000000), ctypes.get_errno())\n"
            "thread = threading.Thread(target=print, args=('thread',))\n"
            "thread.start(); thread.join()\n"
            "pid = os.fork()\n"
            "os._exit(0) if pid == 0 else print('fork', os.waitpid(pid, 0)[1])\n")
    done = sandbox.run([sys.executable, "-c", code], scratch=scratch, timeout=30)
    assert done.stdout.split("\n")[:3] == ["-1 1", "thread", "fork 0"], done
    refused = sandbox.run(["unshare", "--user", "true"], scratch=scratch, timeout=30)
    assert refused.returncode != 0 and "Operation not permitted" in refused.stderr, refused
