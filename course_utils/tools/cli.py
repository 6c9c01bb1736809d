"""The ``course`` command line (also ``python -m course_utils``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..grading.cgroups import LimitsUnavailable
from ..grading.sandbox import SandboxUnavailable


def _doctor(args) -> int:
    from . import doctor

    return doctor.main(as_json=args.json)


def _lab(args) -> int:
    from .lab import main

    return main(instructor=args.instructor, flags=args.jupyter_flags)


def _release(args) -> int:
    from ..paths import course_root
    from .hosted import repository_url
    from .release import release

    root = course_root()
    drifted = release(root, args.lessons or None, check=args.check)
    if not repository_url(root):
        print("Note: no public address is set ([project.urls] Repository in pyproject.toml), "
              "so README has no Colab or Kaggle links and each lesson's first cell asks for "
              "the address (README: Colab and Kaggle).", file=sys.stderr)
    if args.check:
        if drifted:
            print("notebooks/ and README's Colab and Kaggle links are out of date with "
                  "solutions/ and pyproject.toml for: " + ", ".join(drifted)
                  + "\nRun `course release` and commit the result.")
            return 1
        print("notebooks/ matches what nbgrader generates from solutions/.")
        return 0
    print(f"Released: {', '.join(drifted) if drifted else 'nothing changed'}.")
    return 0


def _announce(isolation) -> None:
    """The first line of `course grade`: which isolation is in force."""
    print(f"Isolation: {isolation.description}", flush=True)
    if not isolation.sandboxed:
        print("course grade: WARNING: grading without a sandbox (--unsafe-no-sandbox): "
              "nothing stops a submission from reading the solutions, other submissions and "
              "the gradebook, changing the course and its installed packages, using the "
              "network, or killing the grader's processes.", file=sys.stderr, flush=True)


def _announce_limits(line: str, resources) -> None:
    """The second line of `course grade`: which resource limits hold for each submission."""
    print(f"Limits: {line}", flush=True)
    if not resources.enforced:
        print("course grade: WARNING: grading without whole-submission limits "
              "(--unsafe-no-limits): one submission can take all the memory and processes of "
              "this machine and slow every neighbour.", file=sys.stderr, flush=True)


def _hear(event, as_text: bool) -> None:
    """What `course grade` prints of a run as it goes: the isolation and the limits first
    (in table form only: JSON output stays JSON), then a line per submission on stderr."""
    from ..grading.request import IsolationChosen, LimitsChosen, SubmissionRecorded

    match event:
        case IsolationChosen(isolation) if as_text:
            _announce(isolation)
        case LimitsChosen(summary, resources) if as_text:
            _announce_limits(summary, resources)
        case SubmissionRecorded():
            print(event.line, file=sys.stderr, flush=True)


def _add_limit_options(parser: argparse.ArgumentParser) -> None:
    """One option per limit of grading.records.Limits that has a flag: its type, default,
    unit and help come from the record, where each limit is declared once."""
    from ..grading.records import command_line_limits, spec_of

    options = parser.add_argument_group(
        "limits per submission",
        "what each submission's kernel, and all it starts, may use (docs/grading.md)")
    for limit in command_line_limits():
        spec = spec_of(limit)
        options.add_argument(spec.flag, dest=limit.name, type=type(limit.default),
                             default=limit.default, metavar=spec.metavar,
                             help=spec.option_help(limit.default))


def _limits_from(args: argparse.Namespace):
    from ..grading.records import Limits, command_line_limits

    return Limits(**{limit.name: getattr(args, limit.name) for limit in command_line_limits()})


def _grade(args) -> int:
    from ..grading.startup import skip_slow_optional_imports

    skip_slow_optional_imports()  # before nbformat is imported: seconds saved
    from ..grading.records import Execution
    from ..grading.report import as_json, format_table
    from ..grading.request import GradeRequest
    from ..grading.roster import read_roster
    from ..grading.runner import grade
    from ..grading.shard import WHOLE, Shard
    from ..paths import course_root

    out = Path(args.out)
    as_text = args.format == "table"
    request = GradeRequest(
        course_root(), Path(args.submissions), out, lessons=tuple(args.lesson or ()),
        db_url=args.db, jobs=args.jobs, limits=_limits_from(args), seed=args.seed,
        use_sandbox=not args.unsafe_no_sandbox, use_limits=not args.unsafe_no_limits,
        shard=Shard.parse(args.shard) if args.shard else WHOLE,
        roster=tuple(read_roster(Path(args.roster))) if args.roster else (),
        execute=Execution(args.execute))
    outcome = grade(request, on_event=lambda event: _hear(event, as_text))
    if not as_text:
        print(as_json(outcome.rows, outcome.seed, isolation=outcome.isolation.description,
                      not_graded=outcome.not_graded))
    else:
        print(format_table(outcome.rows))
        print(f"\nSeed: {outcome.seed} (--seed {outcome.seed} repeats this run's hidden "
              f"inputs)\nGradebook: {args.db or out / 'gradebook.db'}; grades: "
              f"{out / 'grades.csv'} and {out / 'grades.json'}; feedback: {out / 'feedback'}/")
        if outcome.absent:
            print(f"{outcome.absent} row(s) are students who submitted nothing for a lesson "
                  "(status missing).")
    for folder in outcome.groups_left:  # on stderr, so that --json output stays JSON
        print(f"Warning: control group {folder} could not be removed (a process in it "
              "outlived SIGKILL); remove it with rmdir once it is empty.", file=sys.stderr)
    if outcome.interrupted:
        print(f"Interrupted: {len(outcome.rows)} submission(s) graded and recorded; "
              f"{outcome.not_graded} not graded. Run the same command again to grade them "
              "(grades are replaced, not added).")
        return 130
    failed = [row for row in outcome.rows if not row.status.fully_graded]
    if len(failed) > outcome.absent:  # a student who submitted nothing is no grading failure
        if as_text:
            print(f"{len(failed) - outcome.absent} submission(s) could not be fully graded; "
                  "see status and reason.")
        return 1
    return 0


def _gradebook(args) -> int:
    """Create (or bring up to date) the gradebook formgrader opens, before any grading."""
    from ..grading import gradebook
    from ..grading.roster import read_roster
    from ..grading.structure import load_lesson
    from ..paths import check_lessons, course_root

    root = course_root()
    db_url = gradebook.database_url(
        args.db or f"sqlite:///{(Path(args.out) / 'gradebook.db').resolve()}")
    database = gradebook.sqlite_path(db_url)
    if database is not None:
        database.parent.mkdir(parents=True, exist_ok=True)
    lessons = [load_lesson(root, name) for name in check_lessons(root, None)]
    gradebook.upgrade(db_url)
    gradebook.register_lessons(db_url, lessons)
    if args.roster:
        gradebook.register_students(db_url, read_roster(Path(args.roster)))
    exchange = _exchange_folder(root)
    print(f"Gradebook ready: {gradebook.shown_url(db_url)} ({len(lessons)} lessons"
          f"{', roster imported' if args.roster else ''}); exchange: {exchange}")
    return 0


def _exchange_folder(root: Path) -> Path:
    """The course's nbgrader exchange, created writable for every user (like /tmp)."""
    from .exchange import prepare_exchange

    return prepare_exchange(root)


def _clean(args) -> int:
    from .hygiene import clean_file

    changed = [path for path in args.paths if clean_file(Path(path))]
    for path in changed:
        print(f"cleaned {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="course", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    doctor = commands.add_parser("doctor", help="report the environment and the device in use")
    doctor.add_argument("--json", action="store_true", help="print JSON instead of text")
    doctor.set_defaults(run=_doctor)

    lab = commands.add_parser(
        "lab", allow_abbrev=False,
        help="open JupyterLab on the lessons with the course's settings (what `make lab` runs); "
             "other arguments go to JupyterLab")
    lab.add_argument("--instructor", action="store_true",
                     help="the whole course, with nbgrader's instructor tools (formgrader)")
    lab.set_defaults(run=_lab, passes_flags_on=True)

    release = commands.add_parser("release", help="regenerate notebooks/ from solutions/")
    release.add_argument("lessons", nargs="*", metavar="LESSON", help="default: every lesson")
    release.add_argument("--check", action="store_true",
                         help="change nothing; exit 1 and list the lessons that drifted")
    release.set_defaults(run=_release)

    grade = commands.add_parser("grade", help="autograde SUBMISSIONS/<student>/<lesson>/*.ipynb")
    grade.add_argument("submissions", help="folder of submissions")
    grade.add_argument("--lesson", action="append", help="grade only this lesson (repeatable)")
    grade.add_argument("--db", help="gradebook SQLAlchemy URL (default: sqlite in --out)")
    grade.add_argument("--out", default="grading-output", help="where grades.csv and feedback go")
    grade.add_argument("--jobs", type=int, default=1, help="submissions graded at once")
    grade.add_argument("--seed", type=int, help="seed for the checks' inputs (default: random)")
    grade.add_argument("--shard", metavar="I/N",
                       help="grade only part I of N (0-based) of the class, split by student: "
                            "N runs with one --seed into one PostgreSQL --db grade it once "
                            "(Slurm arrays, Kubernetes Indexed Jobs, CI matrices: "
                            "docs/cluster.md)")
    grade.add_argument("--roster", metavar="STUDENTS_CSV",
                       help="nbgrader's student CSV (id,first_name,last_name[,email]): names in "
                            "the gradebook, and a row for each student who submitted nothing")
    grade.add_argument("--execute", choices=("needed", "all"), default="needed",
                       help="needed (default): run only the cells the graded cells need, and "
                            "every cell where a check fails for want of a skipped one; all: "
                            "every cell, as nbgrader does (docs/grading.md)")
    grade.add_argument("--format", choices=("table", "json"), default="table",
                       help="what to print: a table (default) or the grades as JSON")
    grade.add_argument("--unsafe-no-sandbox", action="store_true",
                       help="grade without the bubblewrap sandbox (student code then runs "
                            "with your rights: see docs/grading.md)")
    grade.add_argument("--unsafe-no-limits", action="store_true",
                       help="grade without control-group limits (one submission can then "
                            "exhaust this machine: see docs/grading.md)")
    _add_limit_options(grade)
    grade.set_defaults(run=_grade)

    prepare = commands.add_parser(
        "gradebook", help="create the gradebook and register the lessons (before formgrader)")
    prepare.add_argument("--db", help="gradebook SQLAlchemy URL (default: sqlite in --out)")
    prepare.add_argument("--out", default="grading-output", help="course grade's output folder")
    prepare.add_argument("--roster", metavar="STUDENTS_CSV", help="import names from this CSV")
    prepare.set_defaults(run=_gradebook)

    clean = commands.add_parser("clean", help="strip outputs and volatile metadata from notebooks")
    clean.add_argument("paths", nargs="+")
    clean.set_defaults(run=_clean)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "passes_flags_on", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.jupyter_flags = unknown
    try:
        return args.run(args)
    except (ValueError, FileNotFoundError, SandboxUnavailable, LimitsUnavailable) as error:
        # Bad input, a missing tool or driver: one line naming it, no traceback.
        print(f"course {args.command}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a second Ctrl-C: what was graded is already written
        print(f"course {args.command}: interrupted", file=sys.stderr)
        return 130
