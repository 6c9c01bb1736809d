"""Submissions that go after the grading *worker* (issue 28), graded as a class beside honest ones.

Each attacker solved lesson 00's exercises and attacks after them, so it keeps its 4 points:
what is checked is that every attack is stopped with its own status, the honest neighbours keep
their grade, grades.csv and the feedback pages are complete, and the workers' peak memory
(sampled from /proc while the class is graded, printed) stays under a stated bound. Each
attacker is bounded in case the defence were missing (600 MiB sent, 64 MiB written, 3,000
folders). Two runs of real kernels: `make test-hostile` (about a minute of CPU; skipped by
`make test`).
"""
from __future__ import annotations

import copy
import os
import threading
from pathlib import Path

import nbformat
import pytest

from course_utils.grading.records import Limits
from course_utils.grading.report import read_csv
from course_utils.grading.request import GradeRequest
from course_utils.grading.runner import grade
from tests import grading_corpus as corpus

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not os.environ.get("COURSE_HOSTILE"),
                                reason="grades two classes of real kernels: `make test-hostile`")
MIB = 2**20
PEAK_BOUND_MIB = 1200  # a worker's own peak (VmHWM) while grading the class below

_KERNEL = "k = get_ipython().kernel\np = k.get_parent()\n"
# One display message of 600 frames of 1 MiB each (each frame under ZeroMQ's cap); the kernel
# holds 1 MiB.
MULTI_FRAME = _KERNEL + (
    "block = memoryview(bytearray(2**20))\n"
    "k.session.send(k.iopub_socket, 'display_data', {'data': {'text/plain': 'x'},\n"
    "               'metadata': {}}, parent=p, buffers=[block] * 600)\n"
    "import time; time.sleep(3)\n")
# Idle at once, then 30 MB of output for this very cell while the cell goes on.
EARLY_IDLE = _KERNEL + (
    "import time\n"
    "k.session.send(k.iopub_socket, 'status', {'execution_state': 'idle'}, parent=p)\n"
    "time.sleep(0.3)\n"
    "for _ in range(300):\n"
    "    k.session.send(k.iopub_socket, 'stream', {'name': 'stdout', 'text': 'z' * 100_000},\n"
    "                   parent=p)\n"
    "time.sleep(2)\n")
# 20 MB of messages answering no request of the grader's (it drops them).
DISCARDED = _KERNEL + (
    "elsewhere = {'header': {'msg_id': 'elsewhere', 'msg_type': 'execute_request'}}\n"
    "for _ in range(200):\n"
    "    k.session.send(k.iopub_socket, 'stream', {'name': 'stdout', 'text': 'q' * 100_000},\n"
    "                   parent=elsewhere)\n"
    "import time; time.sleep(2)\n")
# 3,000 nested folders, a closed folder and a link, in its folder and in its socket folder.
DEEP_TREE = (
    "import os\n"
    "def deep(top):\n"
    "    fd = os.open(top, os.O_RDONLY)\n"
    "    for _ in range(3000):\n"
    "        os.mkdir('d', dir_fd=fd)\n"
    "        inner = os.open('d', os.O_RDONLY, dir_fd=fd)\n"
    "        os.close(fd)\n"
    "        fd = inner\n"
    "    os.close(fd)\n"
    "    os.symlink('/usr', os.path.join(top, 'link'))\n"
    "    os.mkdir(os.path.join(top, 'closed'))\n"
    "    os.chmod(os.path.join(top, 'closed'), 0)\n"
    "deep('.')\n"
    "deep(os.path.dirname(get_ipython().kernel.connection_file))\n")
# 16 files of 4 MiB (each under the per-file cap) against 8 MiB of scratch space.
FULL_SCRATCH = (
    "written = 0\n"
    "try:\n"
    "    for i in range(16):\n"
    "        with open(f'fill{i}', 'wb') as handle:\n"
    "            handle.write(b'x' * 4 * 2**20)\n"
    "        written += 4\n"
    "except OSError as error:\n"
    "    print('refused:', error.strerror)\n"
    "print('wrote', written, 'MiB')\n")
# Reaches for the caller's frame, where a probe's log would be: graded, flagged for review.
REACHES_FRAMES = "import sys\nprint(type(sys._getframe().f_back).__name__)\n"
ATTACKS = {"multi-frame": MULTI_FRAME, "early-idle": EARLY_IDLE, "discarded": DISCARDED,
           "deep-tree": DEEP_TREE, "full-scratch": FULL_SCRATCH, "reaches-frames": REACHES_FRAMES}
EXPECTED = {"multi-frame": ("output-limit", "larger than 4,194,304 bytes"),
            "early-idle": ("output-limit", "printed more than 100,000 bytes"),
            "discarded": ("output-limit", "in one cell"),
            "deep-tree": ("graded", ""),
            "full-scratch": ("scratch-full", "8 MiB of scratch space"),
            "reaches-frames": ("graded", "")}
# The worker's own cap, reached: 3 GiB of output for this cell when no cap of the grader's
# bounds it (the worker keeps a cell's outputs for the autograded copy).
WORKER_KILLER = _KERNEL + (
    "text = 'w' * (4 * 2**20)\n"
    "for _ in range(768):\n"
    "    k.session.send(k.iopub_socket, 'stream', {'name': 'stdout', 'text': text}, parent=p)\n"
    "import time; time.sleep(5)\n")


class PeakSampler:
    """The largest VmHWM of this process's grading workers (spawned children), sampled."""

    def __init__(self):
        self.peaks: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _sample(self):
        me = str(os.getpid())
        while not self._stop.wait(0.1):
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    stat = Path(f"/proc/{pid}/stat").read_text()
                    if stat.rsplit(")", 1)[1].split()[1] != me or b"spawn_main" not in \
                            Path(f"/proc/{pid}/cmdline").read_bytes():
                        continue
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        kib = int(line.split()[1])
                        self.peaks[int(pid)] = max(self.peaks.get(int(pid), 0), kib)

    @property
    def peak_mib(self) -> float:
        return max(self.peaks.values(), default=0) / 1024


def _class(base: Path, attacks: dict[str, str], honest: tuple[str, ...]) -> Path:
    solution = nbformat.read(ROOT / "solutions" / corpus.LESSON / corpus.NOTEBOOK, as_version=4)
    for student in (*attacks, *honest):
        nb = copy.deepcopy(solution)
        if student in attacks:
            nb.cells.append(nbformat.v4.new_code_cell(attacks[student]))
        path = base / "submissions" / student / corpus.LESSON / corpus.NOTEBOOK
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    return base / "submissions"


def _graded(base: Path, limits: Limits, jobs: int, attacks: dict[str, str],
            honest: tuple[str, ...]):
    submissions = _class(base, attacks, honest)
    with PeakSampler() as sampler:
        grade(GradeRequest(ROOT, submissions, base / "out", jobs=jobs, seed=1, limits=limits))
    rows = {row.student: row for row in read_csv(base / "out" / "grades.csv")}
    return rows, sampler.peak_mib


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory, grading_sandbox):
    limits = Limits(output_bytes=100_000, total_output_bytes=1_000_000, max_message_mb=4,
                    max_cell_received_mb=8, max_notebook_received_mb=64, scratch_mb=8,
                    worker_memory_mb=PEAK_BOUND_MIB)
    base = tmp_path_factory.mktemp("hostile")
    rows, peak = _graded(base, limits, 2, ATTACKS, ("honest-1", "honest-2"))
    print(f"\nworkers' peak memory (VmHWM): {peak:.0f} MiB (bound {PEAK_BOUND_MIB} MiB)")
    return rows, peak, base / "out"


def test_every_submission_is_graded_and_every_table_written(hostile_class):
    rows, _, out = hostile_class
    assert sorted(rows) == sorted([*ATTACKS, "honest-1", "honest-2"])
    for student in rows:
        assert (out / "feedback" / student / f"{corpus.LESSON}.html").is_file(), student
    for student in ("honest-1", "honest-2"):
        assert (rows[student].score, rows[student].status.value) == (4, "graded")


@pytest.mark.parametrize("student", ATTACKS)
def test_each_attack_on_the_worker_stops_with_its_status_and_credit(hostile_class, student):
    """Checks a message of many frames, an early idle status, discarded messages, a deep
    tree and a full scratch space each end as expected with the exercises' 4 points kept."""
    row = hostile_class[0][student]
    status, reason = EXPECTED[student]
    assert (row.score, row.status.value) == (4, status), row
    assert reason in row.reason, row.reason


def test_code_that_reaches_into_frames_is_graded_and_flagged(hostile_class):
    rows, _, out = hostile_class
    assert "f_back" in rows["reaches-frames"].review
    # Those that send the kernel's own messages reach its machinery: flagged too.
    flagged = {student for student, row in rows.items() if row.review}
    assert flagged == {"reaches-frames", "multi-frame", "early-idle", "discarded"}, flagged
    assert "iopub_socket" in rows["multi-frame"].review
    page = (out / "feedback" / "reaches-frames" / f"{corpus.LESSON}.html").read_text()
    assert "Flagged for the instructor's review" in page
    copy_ = out / "autograded" / "reaches-frames" / corpus.LESSON / corpus.NOTEBOOK
    assert "Flagged for review" in copy_.read_text()


def test_the_workers_peak_memory_stays_under_its_bound(hostile_class):
    assert 0 < hostile_class[1] < PEAK_BOUND_MIB


def test_a_worker_at_its_own_memory_cap_costs_one_submission(tmp_path, grading_sandbox):
    """Checks a worker whose caps on what it receives are lifted, sent 3 GiB of output for one
    cell, stops at its own memory cap: ZeroMQ refuses the rest (`output-limit`) or the worker
    fails (`error`); either way that submission keeps its 4 points and the next is graded."""
    unbounded = 2**40
    limits = Limits(output_bytes=unbounded, total_output_bytes=unbounded,
                    max_cell_received_mb=unbounded, max_notebook_received_mb=unbounded,
                    worker_memory_mb=PEAK_BOUND_MIB)
    rows, peak = _graded(tmp_path, limits, 1, {"a-worker-killer": WORKER_KILLER},
                         ("honest-after",))
    print(f"\nworkers' peak memory (VmHWM): {peak:.0f} MiB (cap {PEAK_BOUND_MIB} MiB of data)")
    killer = rows["a-worker-killer"]
    assert killer.score == 4 and killer.status.value in ("output-limit", "error"), killer
    assert "memory cap" in killer.reason or "capped at" in killer.reason, killer.reason
    assert (rows["honest-after"].score, rows["honest-after"].status.value) == (4, "graded")
    assert peak < PEAK_BOUND_MIB + 200  # data capped; code and libraries come on top
