"""``course grade``: grade a folder of submissions, in parallel, in sandboxes, losing nothing.

The order of a run: check the inputs (sandbox, gradebook driver, lessons) before any work;
read the instructor's lessons once; list the submissions without opening them; start the
workers and, meanwhile, set up the gradebook; then record each result — gradebook row and
feedback page — the moment it arrives, so that an interrupted run keeps every grade earned.
"""
from __future__ import annotations

import dataclasses
import os
import secrets
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..paths import check_lessons
from . import cgroups, feedback, gradebook, sandbox, submitted, workspace
from .changes import ChangeSummary, record_changes
from .groups import Group
from .intake import Submission, absent, discover, student_folders
from .late import NO_EXTENSIONS, NO_LATE_POLICY, Extensions, LatePolicy
from .pool import StopRequest, WorkerPool
from .records import Limits, SubmissionResult
from .report import Row, write_csv, write_json
from .request import (
    GradeRequest,
    IsolationChosen,
    LimitsChosen,
    OnEvent,
    SubmissionRecorded,
    describe_limits,
    ignore,
)
from .roster import RosterStudent
from .sandbox import Isolation
from .scratch import remove_tree
from .session import KernelRecipe
from .shard import Shard
from .structure import Lesson, load_lesson
from .worker import WorkerConfig, unread

KEPT_ENV = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "COURSE_DEVICE", "VIRTUAL_ENV")
NO_SANDBOX = Isolation(False, "none (--unsafe-no-sandbox): " + sandbox.NOT_DEFENDED_WITHOUT_SANDBOX)


@dataclass(frozen=True)
class GradingOutcome:
    """What a run did: one row per submission graded, and how many were left undone."""

    rows: list[Row]
    isolation: Isolation
    not_graded: int = 0  # submissions left when the run was interrupted
    seed: int | None = None  # the run's seed: hidden checks drew their inputs from it
    absent: int = 0  # rows of students (roster or found) with no folder for a lesson
    resources: cgroups.ResourceControl = cgroups.UNSAFE  # whole-submission limits in force
    group: str = ""  # the run's control group (relative to each root), removed at its end
    groups_left: list[str] = dataclasses.field(default_factory=list)  # any it could not remove
    changes: ChangeSummary | None = None  # what changed since the last run (changes.py)

    @property
    def interrupted(self) -> bool:
        return self.not_graded > 0


def isolation_in_force(use_sandbox: bool) -> Isolation:
    """The isolation a run will use; SandboxUnavailable when a sandbox is wanted but absent."""
    return sandbox.require() if use_sandbox else NO_SANDBOX


def resources_in_force(use_limits: bool) -> cgroups.ResourceControl:
    """The whole-submission limits a run will use; LimitsUnavailable when wanted but absent.

    ``COURSE_GRADE_UNSAFE_NO_LIMITS=1`` in the environment acts as ``--unsafe-no-limits``
    where no cgroup can be made (the test suite sets it on such machines, e.g. a CI runner
    without root); it never turns limits off where they can be set.
    """
    if not use_limits:
        return cgroups.UNSAFE
    control = cgroups.detect()
    if not control.enforced and os.environ.get(cgroups.ENV_UNSAFE) == "1":
        return dataclasses.replace(cgroups.UNSAFE, description=(
            f"none ({cgroups.ENV_UNSAFE}=1: {control.problem}): " + cgroups.NOT_LIMITED))
    return cgroups.require()


@dataclass(frozen=True)
class ClassToGrade:
    """Stage 1's result: the lessons chosen and this run's part of the class, nothing opened."""

    lessons: dict[str, Lesson]  # by name, in course order
    found: list[Submission]  # this shard's submissions of the chosen lessons
    not_there: list[Submission]  # a student of this shard with no folder for a lesson graded
    names: dict[str, str]  # student id -> display name from the roster
    roster: list[RosterStudent]

    @property
    def gradable(self) -> list[Submission]:
        return [submission for submission in self.found if submission.gradable]


def grade(request: GradeRequest, *, on_event: OnEvent = ignore) -> GradingOutcome:
    """Grade every submission under ``request.submissions``/<student>/<lesson>/.

    Writes the gradebook, ``grades.csv`` and ``grades.json``,
    ``feedback/<student>/<lesson>.html``, and for nbgrader's formgrader
    ``submitted/<student>/<lesson>/`` (with ``timestamp.txt``) and
    ``autograded/<student>/<lesson>/`` under ``request.out``. The roster names the students
    in the gradebook and adds a ``missing`` row for each lesson a student on it did not
    submit. Hand grades given in formgrader are kept, and counted. Refuses to grade without
    the sandbox unless ``request.use_sandbox`` is False, and without whole-submission limits
    (cgroups.py) unless ``request.use_limits`` is False. ``on_event`` hears which isolation and
    limits are in force before any work starts (IsolationChosen, LimitsChosen), then each
    result as it is recorded (SubmissionRecorded). Ctrl-C stops the run: what was graded is
    kept and written, and the outcome says how many were not graded. ``request.shard``
    grades only its part of the class (its students, roster included; shard.py).

    The stages, in order: check the request; say what defends the machine; read the class;
    grade it on the workers (the gradebook is set up meanwhile); write the tables.
    """
    root, submissions, out, jobs = request.root, request.submissions, request.out, request.jobs
    chosen_names = _check_request(root, submissions, out, list(request.lessons) or None,
                                  jobs)
    request.late_policy.check_lessons(check_lessons(root, None))
    db_url = gradebook.database_url(request.db_url
                                    or f"sqlite:///{(out / 'gradebook.db').resolve()}")
    in_force = isolation_in_force(request.use_sandbox)
    resources = resources_in_force(request.use_limits)
    on_event(IsolationChosen(in_force))
    limits = _limits_in_force(request.limits, resources)
    on_event(LimitsChosen(describe_limits(resources, limits, jobs), resources))
    # The workers start now, and load while this process reads lessons and submissions.
    with WorkerPool(jobs) as pool:
        out.mkdir(parents=True, exist_ok=True)
        klass = read_class(root, submissions, chosen_names, request.shard,
                           list(request.roster), limits.max_notebook_bytes)
        run_seed = secrets.randbelow(2**31) if request.seed is None else request.seed
        scratch_root = workspace.make_scratch()  # and removes what killed runs left
        run_group = Group(resources, scratch_root.name)
        if resources.enforced:  # as much CPU as the processes of `jobs` kernels at work
            run_group.create(None, cpu_tasks=4 * jobs)
        recorder = _Recorder(db_url, out, len(klass.found), on_event,
                             (request.late_policy, request.extensions))
        try:
            recipe = dataclasses.replace(
                _kernel_recipe(root, out, submissions, scratch_root, db_url,
                               _lessons_of(klass), limits, jobs, in_force),
                control=resources, group=run_group.name,
                cpu_share=max(1.0, (os.cpu_count() or 1) / jobs))
            config = WorkerConfig(
                run_seed=run_seed, limits=limits, recipe=recipe, scratch_root=scratch_root,
                autograded_dir=out / "autograded",
                # Two spares per worker where there is a core for each worker's second one.
                spares=2 if (os.cpu_count() or 1) >= 2 * jobs else 1, execute=request.execute)
            with StopRequest() as stop:
                pool.run(klass.gradable, config, recorder,
                         lambda: _set_up_gradebook(recorder, klass, submissions, out), stop)
        finally:
            recorder.close()
            groups_left = []
            try:
                # Every worker is gone first, its kernels with it: a worker still running
                # could start a kernel, and so make the run's group again, after its removal.
                pool.close()
            finally:
                if resources.enforced:  # no survivor: whatever a submission left is killed here
                    groups_left = [str(folder) for folder in run_group.remove()]
            # The tables first: nothing a submission left behind can cost the class them.
            rows, listed_absent = write_tables(out, klass, recorder.results, run_seed)
            changes = record_changes(out, root, klass.lessons, recorder.results, run_seed)
            remove_tree(scratch_root)
    return GradingOutcome(rows, in_force, len(klass.found) - len(recorder.results), run_seed,
                          listed_absent, resources, run_group.name, groups_left, changes)


def _check_request(root: Path, submissions: Path, out: Path, lessons: list[str] | None,
                   jobs: int) -> list[str]:
    """Stage 0: the lessons asked for, or ValueError naming what is wrong with the request."""
    if jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {jobs}.")
    if not submissions.is_dir():
        raise ValueError(f"Submissions folder {str(submissions)!r} does not exist or is not a "
                         "folder; expected SUBMISSIONS/<student>/<lesson>/<notebook>.ipynb.")
    workspace.require_writable(out)
    return check_lessons(root, lessons)


def _limits_in_force(limits: Limits, resources: cgroups.ResourceControl) -> Limits:
    if Path("/dev/nvidiactl").exists() and not resources.enforced:
        # CUDA reserves more address space than any sensible cap: without cgroups, no cap.
        return dataclasses.replace(limits, memory_mb=0)
    return limits


def read_class(root: Path, submissions: Path, lesson_names: list[str], shard: Shard,
               roster: list[RosterStudent], max_notebook_bytes: int) -> ClassToGrade:
    """Stage 1: the instructor's lessons, read once, and this shard's submissions, listed."""
    chosen = {name: load_lesson(root, name) for name in lesson_names}
    everyone = discover(submissions, chosen, max_notebook_bytes)
    found = [submission for submission in everyone if shard.holds(submission.student)]
    students = [student for student in dict.fromkeys(
        [*(student.id for student in roster), *student_folders(submissions)])
        if shard.holds(student)]
    # Who has no folder for a lesson that this run grades (someone submitted it): a lesson
    # nobody submitted is not in the table at all.
    submitted_lessons = {s.lesson for s in everyone}  # in any shard
    not_there = absent(submissions, {name: lesson for name, lesson in chosen.items()
                                     if name in submitted_lessons}, students, found)
    return ClassToGrade(chosen, found, not_there,
                        {student.id: student.display_name for student in roster}, roster)


def _lessons_of(klass: ClassToGrade) -> list[Lesson]:
    """The lessons that have something to grade (their kernels preload these lessons' imports)."""
    return [klass.lessons[name] for name in dict.fromkeys(s.lesson for s in klass.gradable)]


def _set_up_gradebook(recorder: _Recorder, klass: ClassToGrade, submissions: Path,
                      out: Path) -> None:
    """Stage 2, while the workers start their first kernels: lessons and students registered,
    the submissions kept where formgrader counts them, and what cannot be read recorded."""
    recorder.open(list(klass.lessons.values()), klass.roster)
    for submission in klass.found:
        recorder.timestamps[(submission.student, submission.lesson)] = \
            submitted.keep(submissions, submission, out / "submitted")
    for submission in klass.found:
        if not submission.gradable:
            recorder(_unread(submission))


def write_tables(out: Path, klass: ClassToGrade, results: list[SubmissionResult],
                 run_seed: int) -> tuple[list[Row], int]:
    """Last stage: grades.csv and grades.json, a row per result (and, when the run finished,
    per lesson a student submitted nothing for); returns the rows and how many are absences."""
    rows = [Row.from_result(result, run_seed, klass.names.get(result.student, ""))
            for result in results]
    finished = len(results) == len(klass.found)
    if finished:  # list who submitted nothing (nothing to score: exercise cells left blank)
        rows += [dataclasses.replace(
            Row.from_result(_unread(submission), run_seed,
                            klass.names.get(submission.student, "")), exercises=())
            for submission in klass.not_there]
    lesson_order = {name: index for index, name in enumerate(klass.lessons)}
    rows.sort(key=lambda row: (row.student, lesson_order[row.lesson]))
    columns = [item.grade_id for lesson in klass.lessons.values()
               for notebook in lesson.notebooks for item in notebook.items]
    write_csv(out / "grades.csv", rows, columns)
    write_json(out / "grades.json", rows, run_seed)
    return rows, len(klass.not_there) if finished else 0


class _Recorder:
    """Keeps each result as it arrives: gradebook row, feedback page, then the caller hears."""

    def __init__(self, db_url: str, out: Path, total: int, on_event: OnEvent,
                 late: tuple[LatePolicy, Extensions] = (NO_LATE_POLICY, NO_EXTENSIONS)):
        self.db_url, self.out, self.total, self.on_event = db_url, out, total, on_event
        self.late = late
        self.results: list[SubmissionResult] = []
        self.timestamps: dict[tuple[str, str], datetime] = {}
        self._writer: gradebook.GradebookWriter | None = None

    def open(self, lessons: list[Lesson], roster: list[RosterStudent]) -> None:
        gradebook.register_lessons(self.db_url, lessons)
        if roster:
            gradebook.register_students(self.db_url, roster)
        self._writer = gradebook.GradebookWriter(self.db_url, *self.late)

    def __call__(self, result: SubmissionResult) -> None:
        assert self._writer is not None, "the gradebook is set up before any result arrives"
        # The gradebook hands back the instructor's hand grades, kept across re-grades.
        result = self._writer.record(result, self.timestamps.get((result.student,
                                                                  result.lesson)))
        feedback.write(self.out / "feedback", result)
        if result.late is not None:
            from .late_plugin import show_in_formgrader  # imports nbgrader: only when late

            show_in_formgrader(self.out / "autograded", result)
        self.results.append(result)
        self.on_event(SubmissionRecorded(result, len(self.results), self.total))

    def close(self) -> None:
        if self._writer is not None:
            self._writer.__exit__(None, None, None)


def _unread(submission: Submission) -> SubmissionResult:
    """The result of a submission with no file to grade (missing, symbolic link, ...)."""
    return SubmissionResult(submission.student, submission.lesson,
                            tuple(map(unread, submission.notebooks)))


def _kernel_recipe(root: Path, out: Path, submissions: Path, scratch_root: Path, db_url: str,
                   lessons: list[Lesson], limits: Limits, jobs: int,
                   in_force: Isolation) -> KernelRecipe:
    env = {key: os.environ[key] for key in KEPT_ENV if key in os.environ}
    # Parallel kernels share the cores instead of each using all of them.
    threads = max(1, (os.cpu_count() or 1) // jobs)
    env.update(MPLBACKEND="Agg", PYTHONHASHSEED="0", OMP_NUM_THREADS=str(threads),
               PYDEVD_DISABLE_FILE_VALIDATION="1", TMPDIR="/tmp")
    hidden = [root / "solutions", root / ".git", out, submissions, scratch_root]
    database = gradebook.sqlite_path(db_url)
    if database is not None:
        hidden.append(database)
    preload = {lesson.name: lesson.imports for lesson in lessons}
    return KernelRecipe(limits, env, preload, bwrap=in_force.bwrap if in_force.sandboxed else None,
                        hidden=tuple(path.resolve() for path in hidden),
                        syscall_filter=in_force.sandboxed and in_force.syscall_filter)
