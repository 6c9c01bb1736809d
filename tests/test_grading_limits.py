"""Submissions that go after the grading *machine*, graded as one class beside honest ones.

The attackers solved the exercises (they start from the solution), so they keep their
points: what is checked is that each attack is stopped and recorded. Each attacker is
bounded so that it cannot harm a shared machine if the defence were missing: memory attacks
stop at 3 GiB in all (against a 2 GiB cap), the fork bomb at 300 processes, the file attack
at 3,000 files, the spinner after 60 s, output at 30 MB. The whole-sandbox limits
(cgroups.py) must stop each, say so in the row's reason, leave the honest neighbours their
full grade, and leave nothing running.
"""
from __future__ import annotations

import copy
import os
import secrets
import shutil
import time
from pathlib import Path

import nbformat
import pytest
import torch

from course_utils.grading import cgroups, groups
from course_utils.grading.fairtime import starved_seconds
from course_utils.grading.groups import Group
from course_utils.grading.records import Limits
from course_utils.grading.request import GradeRequest
from course_utils.grading.runner import grade
from tests import grading_corpus as corpus

ROOT = Path(__file__).resolve().parents[1]
TOKEN = f"{secrets.randbelow(10**6) + 10**6}.25"  # in the command line of every attacker's child

# Six fresh processes of 512 MiB each: 3 GiB in all, each far under the per-process cap.
MANY_PROCESSES = (
    "import subprocess, sys\n"
    "hold = ('import time; block = bytearray(512 * 2**20); '\n"
    "        'block[::4096] = bytes(len(block[::4096])); time.sleep(5)')\n"
    "children = [subprocess.Popen([sys.executable, '-c', hold]) for _ in range(6)]\n"
    "print('exit codes', [child.wait() for child in children])\n")
# memfd files (no rlimit counts them): 96 × 32 MiB = 3 GiB held open in the kernel itself.
MEMFD = (
    "import os\n"
    "held = []\n"
    "chunk = b'x' * (32 * 2**20)\n"
    "for i in range(96):\n"
    "    fd = os.memfd_create(f'hold{i}')\n"
    "    os.write(fd, chunk)\n"
    "    held.append(fd)\n"
    "print('held', len(held) * 32, 'MiB')\n")
# Memory that outlives its process: System V segments never removed, a file in /dev/shm.
SHARED_MEMORY = (
    "import ctypes\n"
    "libc = ctypes.CDLL(None)\n"
    "libc.shmat.restype = ctypes.c_void_p\n"
    "held = 0\n"
    "for _ in range(4):\n"
    "    segment = libc.shmget(0, 256 * 2**20, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT\n"
    "    if segment < 0:\n"
    "        break\n"
    "    ctypes.memset(libc.shmat(segment, None, 0), 1, 256 * 2**20)\n"
    "    held += 256\n"
    "for i in range(4):  # files under the per-file cap (64 MiB)\n"
    "    with open(f'/dev/shm/hold{i}', 'wb') as file:\n"
    "        file.write(b'x' * (48 * 2**20))\n"
    "print('System V segments', held, 'MiB, and 192 MiB in /dev/shm')\n")
FORK_BOMB = (
    "import os, time\n"
    "started = 0\n"
    "for _ in range(300):\n"
    "    try:\n"
    "        pid = os.fork()\n"
    "    except OSError:\n"
    "        break\n"
    "    if pid == 0:\n"
    "        time.sleep(20)\n"
    "        os._exit(0)\n"
    "    started += 1\n"
    "print('forked', started)\n")
OPEN_FILES = (
    "opened = []\n"
    "try:\n"
    "    for _ in range(3000):\n"
    "        opened.append(open('/dev/null'))\n"
    "except OSError as error:\n"
    "    print('refused:', type(error).__name__)\n"
    "print('opened', len(opened))\n")
DAEMON = (
    "import os, subprocess\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    f"        os.execvp('sleep', ['sleep', '{TOKEN}'])\n"
    "    os._exit(0)\n"
    "os.wait()\n")

# Eight processes spinning for 60 s, beside an honest lesson-07 submission (torchrun with two
# ranks) graded at the same time.
SPINNER = (
    "# padding: the biggest lesson-00 notebook is handed out first, beside lesson 07\n" * 400
    + "import multiprocessing as mp, time\n"
    "def spin():\n"
    "    end = time.monotonic() + 60\n"
    "    while time.monotonic() < end:\n"
    "        pass\n"
    "spinners = [mp.get_context('fork').Process(target=spin) for _ in range(8)]\n"
    "for spinner in spinners: spinner.start()\n"
    "spin()\n")
LESSON_07 = ("07_multi_gpu", "multi_gpu.ipynb")

# Output that grows without bound: cells each under the per-cell cap (100 kB here) that add
# up past the notebook's (1 MB), and one error message of 30 MB; both after the exercises.
MANY_OUTPUTS = ["print('y' * 90_000)\n"] * 15
HUGE_ERROR = ["raise ValueError('x' * 30_000_000)\n"]
FLOODS = {"many-outputs": MANY_OUTPUTS, "huge-error": HUGE_ERROR}

ATTACKS = {"spinner": SPINNER, "many-processes": MANY_PROCESSES, "memfd": MEMFD,
           "fork-bomb": FORK_BOMB, "open-files": OPEN_FILES, "daemon": DAEMON,
           "shared-memory": SHARED_MEMORY}
HONEST = ("honest-1", "honest-2")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if not cgroups.detect().enforced:
        pytest.skip(f"no control groups here: {cgroups.detect().problem}")
    base = tmp_path_factory.mktemp("limits")
    solution = nbformat.read(ROOT / "solutions" / corpus.LESSON / corpus.NOTEBOOK, as_version=4)
    for student, source in ATTACKS.items():
        _write(base / "submissions", student, _before_first_exercise(solution, source))
    for student, cells in FLOODS.items():
        flood = copy.deepcopy(solution)
        flood.cells += [nbformat.v4.new_code_cell(source) for source in cells]
        _write(base / "submissions", student, flood)
    for student in HONEST:
        _write(base / "submissions", student, solution)
    lesson_07 = base / "submissions" / "honest-07" / LESSON_07[0] / LESSON_07[1]
    lesson_07.parent.mkdir(parents=True)
    lesson_07.write_bytes((ROOT / "solutions" / LESSON_07[0] / LESSON_07[1]).read_bytes())
    memory_before, processes_before = _outliving_mib(), len(_pids())
    limits = Limits(memory_mb=2048, max_processes=128, max_open_files=256, cell_timeout=90,
                    output_bytes=100_000, total_output_bytes=1_000_000)
    outcome = grade(GradeRequest(ROOT, base / "submissions", base / "out", jobs=2, seed=1,
                                 limits=limits))
    rows = {row.student: row for row in outcome.rows if row.status.value != "missing"}
    return rows, base / "out", memory_before, processes_before, outcome


def _before_first_exercise(solution, source):
    nb = copy.deepcopy(solution)
    index = next(i for i, cell in enumerate(nb.cells)
                 if cell.metadata.get("nbgrader", {}).get("grade_id") == "pick_device")
    nb.cells.insert(index, nbformat.v4.new_code_cell(source))
    return nb


def _write(submissions: Path, student: str, nb) -> None:
    path = submissions / student / corpus.LESSON / corpus.NOTEBOOK
    path.parent.mkdir(parents=True)
    nbformat.write(nb, path)


def _printed(out: Path, student: str) -> str:
    nb = nbformat.read(out / "autograded" / student / corpus.LESSON / corpus.NOTEBOOK,
                       as_version=4)
    return "".join(output.get("text", "") for cell in nb.cells if cell.cell_type == "code"
                   for output in cell.outputs)


def _outliving_mib() -> int:
    """MiB held where memory outlives the processes that made it: this machine's System V
    shared memory segments and its /dev/shm. (Free memory machine-wide is not the measure: the
    suite's other workers move it by GiBs; the processes and the control group are checked
    apart.)"""
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    sysv = sum(int(line.split()[3]) for line in lines if line.strip())  # the "size" column
    return (sysv + shutil.disk_usage("/dev/shm").used) // 2**20


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _mentioning(text: str) -> list[int]:
    found = []
    for pid in _pids():
        try:
            if text.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            pass
    return found


def test_the_limits_in_force_are_named(graded):
    """Checks the run reports a cgroup backend, not `none`."""
    *_, outcome = graded
    assert outcome.resources.enforced and outcome.resources.backend is not cgroups.Backend.NONE


def test_honest_neighbours_keep_their_full_grade(graded):
    """Checks honest submissions graded beside the attackers get 4/6 (the written answer waits)."""
    rows = graded[0]
    for student in HONEST:
        assert (rows[student].score, rows[student].status.value) == (4, "graded"), rows[student]


def test_a_spinning_neighbour_costs_an_honest_lesson_07_nothing(graded):
    """Checks an honest lesson-07 submission (torchrun, two ranks) graded while a neighbour
    spins eight processes for 60 s keeps its full 7/9 (each worker's sandboxes get an equal
    CPU share, and time lost waiting for a core extends a cell's limit)."""
    rows = graded[0]
    assert (rows["honest-07"].score, rows["honest-07"].status.value) == (7, "graded"), \
        rows["honest-07"]
    assert rows["spinner"].status.value == "graded", rows["spinner"]


def test_memory_over_many_processes_is_capped_for_the_whole_sandbox(graded):
    """Checks six children of 512 MiB each (each under the per-process cap) meet the sandbox's
    2 GiB: the memory limit kills some, and the reason says so."""
    row = graded[0]["many-processes"]
    assert "the memory limit killed" in row.reason, row
    # The kernel prints its children's exit codes when the limit killed only children. With
    # PyPI's CUDA build the kernel is the group's largest process (its CUDA libraries), and the
    # kernel's out-of-memory killer may pick it instead: stopped all the same, and said so.
    printed = _printed(graded[1], "many-processes")
    if torch.version.cuda and row.status.value == "kernel-died":
        return
    assert "exit codes" in printed, row  # the kernel itself lived on


def test_memfd_pages_count_against_the_sandbox(graded):
    """Checks 3 GiB of memfd files (which no rlimit counts) are stopped at the sandbox's cap."""
    row = graded[0]["memfd"]
    assert "the memory limit killed" in row.reason, row
    assert "held 3072 MiB" not in _printed(graded[1], "memfd")


def test_shared_memory_held_past_its_process_ends_with_the_sandbox(graded):
    """Checks the attacker really held System V segments and a /dev/shm file (its output says
    so); that none of it is left on the machine is checked below, with the processes."""
    assert "System V segments 1024 MiB, and 192 MiB in /dev/shm" in _printed(graded[1],
                                                                            "shared-memory")


def test_a_fork_bomb_meets_the_process_limit(graded):
    """Checks a bounded fork bomb (300) is refused past the sandbox's 128 processes."""
    row = graded[0]["fork-bomb"]
    assert "the process limit refused" in row.reason, row
    forked = int(_printed(graded[1], "fork-bomb").split("forked ")[1].split()[0])
    assert forked < 128


def test_open_files_are_capped_per_process(graded):
    """Checks a process cannot open more files than --max-open-files (256)."""
    printed = _printed(graded[1], "open-files")
    assert "refused: OSError" in printed, printed
    assert int(printed.split("opened ")[1].split()[0]) < 256


def test_nothing_survives_and_the_machine_gets_its_memory_back(graded):
    """Checks no process an attacker started (a double-forked daemon included) runs after
    grading, no cgroup is left, and free memory and the process count are back (within what
    other work on a shared machine moves them)."""
    _, _, memory_before, processes_before, outcome = graded
    deadline = time.monotonic() + 10
    while _mentioning(TOKEN) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _mentioning(TOKEN) == []
    assert outcome.groups_left == []
    # This run's group only: a grading test on another pytest worker may have its own now.
    assert outcome.group.startswith("course-grade-")
    for root in outcome.resources.roots:
        folder = Path(root) / outcome.group
        assert not folder.exists(), (
            f"{folder} is still there, though groups_left={outcome.groups_left}; below it: "
            f"{sorted(str(child) for child in folder.rglob('*') if child.is_dir())}")
    # The shared-memory attacker held 1.2 GiB there, in the sandbox's own IPC namespace and
    # /dev/shm, which end with it; another test's kernels may hold a little meanwhile.
    assert _outliving_mib() < memory_before + 256
    assert len(_pids()) < processes_before + 40


def test_the_run_group_goes_only_once_every_worker_is_gone(tmp_path, monkeypatch):
    """Checks `course grade` removes its control group after its workers have left (a worker
    still running could start a kernel, and so make the group again, after the removal),
    and that no folder of the group is left in any hierarchy."""
    if not cgroups.detect().enforced:
        pytest.skip(f"no control groups here: {cgroups.detect().problem}")
    import multiprocessing

    before = set(multiprocessing.active_children())
    alive_at_removal = []
    remove = Group.remove

    def remove_and_note(group, *args, **kwargs):
        if group.name.startswith("course-grade-") and "/" not in group.name:  # the run's
            alive_at_removal.extend(f"{child.name} (pid {child.pid})" for child in
                                    set(multiprocessing.active_children()) - before)
        return remove(group, *args, **kwargs)

    monkeypatch.setattr(Group, "remove", remove_and_note)
    (tmp_path / "submissions").mkdir()
    outcome = grade(GradeRequest(ROOT, tmp_path / "submissions", tmp_path / "out", jobs=2,
                                 seed=1))
    assert outcome.group.startswith("course-grade-") and outcome.groups_left == []
    assert alive_at_removal == [], "workers were still running when the run's group was removed"
    left = [root for root in outcome.resources.roots if (Path(root) / outcome.group).exists()]
    assert left == [], f"{outcome.group} is still there in {left}"


def test_a_kernel_started_late_does_not_make_the_run_group_again(tmp_path):
    """Checks a kernel set up after its run's group was removed fails instead of making the
    group (and its worker's) again, in any hierarchy."""
    control = cgroups.detect()
    if not control.enforced:
        pytest.skip(f"no control groups here: {control.problem}")
    from course_utils.grading.session import KernelRecipe, KernelSession

    run = Group(control, f"course-grade-late-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        assert run.create(None).remove() == []
        recipe = KernelRecipe(Limits(), {}, control=control, group=run.name)
        with pytest.raises(FileNotFoundError):
            KernelSession(tmp_path / "kernel", recipe, corpus.LESSON)
        assert [folder for folder in run.folders if folder.exists()] == []
    finally:
        run.remove()


def test_remove_lists_a_group_made_again_meanwhile(tmp_path, monkeypatch):
    """Checks Group.remove reports what is there once it is done: a group that something
    makes again as it is removed (a late kernel's mkdir) is listed as left, not as removed;
    the folders stand in for v1 hierarchies."""
    roots = tuple(str(tmp_path / controller) for controller in cgroups.V1_CONTROLLERS)
    group = Group(cgroups.ResourceControl(cgroups.Backend.V1, "v1", roots=roots),
                          "course-grade-x")
    for folder in group.folders:
        (folder / "w1" / "k1").mkdir(parents=True)
    rmdir = Path.rmdir

    def rmdir_and_make_again(path):
        rmdir(path)
        if path.name == group.name:
            path.mkdir()

    monkeypatch.setattr(Path, "rmdir", rmdir_and_make_again)
    assert group.remove(wait_s=0.3) == group.folders
    assert all(folder.exists() for folder in group.folders)
    monkeypatch.setattr(Path, "rmdir", rmdir)
    assert group.remove() == []
    assert not any(folder.exists() for folder in group.folders)


@pytest.mark.parametrize("student", FLOODS)
def test_output_floods_stop_with_the_credit_so_far(graded, student):
    """Checks many outputs under the per-cell cap, and one 30 MB error message, stop at the
    notebook's caps as `output-limit` with the exercises' credit kept, and the autograded
    copy stays small."""
    rows, out = graded[0], graded[1]
    row = rows[student]
    assert (row.score, row.status.value) == (4, "output-limit"), row
    copy_ = out / "autograded" / student / corpus.LESSON / corpus.NOTEBOOK
    assert copy_.stat().st_size < 1_500_000


def test_a_systemd_scope_carries_every_limit():
    """Checks the systemd-run backend (cgroup v2 without a writable subtree) starts the
    sandbox in a scope with MemoryMax, no swap, TasksMax and a CPU weight, and the open-file
    launcher inside it."""
    control = cgroups.ResourceControl(cgroups.Backend.SYSTEMD, "scope")
    limits = Limits(memory_mb=1024, max_processes=64, max_open_files=128)
    argv = groups.launch_argv(Group(control, "x"), limits, ["bwrap", "--", "cmd"])
    scope = argv[:argv.index("--")]
    assert scope[0] == "systemd-run" and "--scope" in scope
    assert ("--user" in scope) == (os.geteuid() != 0)
    for setting in ("MemoryMax=1024M", "MemorySwapMax=0", "TasksMax=64", "CPUWeight=100"):
        assert setting in scope
    assert argv[-3:] == ["bwrap", "--", "cmd"] and "--max-open-files" in argv and "128" in argv


def test_without_cgroups_grading_refuses_unless_told(monkeypatch):
    """Checks a machine with no cgroup backend refuses to grade, naming --unsafe-no-limits,
    and grades without limits only when told (the flag, or COURSE_GRADE_UNSAFE_NO_LIMITS=1);
    the variable never turns limits off where they can be set."""
    from course_utils.grading.runner import resources_in_force

    none = cgroups.ResourceControl(cgroups.Backend.NONE, "none", problem="no cgroups here")
    monkeypatch.setattr(cgroups, "detect", lambda: none)
    monkeypatch.delenv(cgroups.ENV_UNSAFE, raising=False)
    with pytest.raises(cgroups.LimitsUnavailable, match="--unsafe-no-limits"):
        resources_in_force(True)
    assert not resources_in_force(False).enforced
    monkeypatch.setenv(cgroups.ENV_UNSAFE, "1")
    assert "no cgroups here" in resources_in_force(True).description
    enforced = cgroups.ResourceControl(cgroups.Backend.V1, "v1", roots=("/x", "/y", "/z"))
    monkeypatch.setattr(cgroups, "detect", lambda: enforced)
    assert resources_in_force(True) is enforced


def test_time_lost_counts_only_below_the_sandbox_share():
    """Checks the fair-time rule on scheduler numbers (ns): a sandbox whose own threads queue
    behind each other while it uses its share earns nothing; one that got less than its
    share is owed the longest wait, up to what it lacked; one that slept is owed nothing."""
    second = 10**9
    # Eight spinners on a 1-core share for 10 s: 10 s of CPU in all, each waited 8.75 s.
    spinner = {tid: (int(1.25 * second), int(8.75 * second)) for tid in range(8)}
    assert starved_seconds({}, spinner, 10.0, 1.0) == 0
    # One thread that ran 4 s of 10 on a 1-core share, waiting 6 s: owed 6 s.
    starved = {1: (4 * second, 6 * second)}
    assert starved_seconds({}, starved, 10.0, 1.0) == pytest.approx(6.0)
    # Counted from the cell's start: waits before it are not owed.
    assert starved_seconds({1: (0, 5 * second)}, starved, 10.0, 1.0) \
        == pytest.approx(1.0)
    # A sleeper: no CPU, no wait.
    assert starved_seconds({}, {1: (0, 0)}, 10.0, 1.0) == 0
