"""The cluster's commands: `course collect` and `course cluster-check` (docs/cluster.md)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

GRADEBOOK_ENV = "COURSE_GRADEBOOK_URL"  # nbgrader_config.py reads it too: formgrader's gradebook


def _collect(args) -> int:
    """Check a sharded class is complete; if it is, write its tables from the gradebook."""
    from ..grading.collect import CollectRequest, check, write_class
    from ..grading.roster import read_roster
    from ..paths import course_root

    request = CollectRequest(
        course_root(), Path(args.out), db_url=args.db,
        submissions=Path(args.submissions) if args.submissions else None,
        roster=tuple(read_roster(Path(args.roster))) if args.roster else ())
    checked, found = check(request)
    print(checked.report())
    if not checked.complete:
        return 1
    if args.check:
        return 0
    rows = write_class(request, checked, found)
    out = request.out
    waiting = sum(row.status.value == "graded" and "manual grading" in row.reason for row in rows)
    print(f"Wrote {len(rows)} row(s): {out / 'grades.csv'}, {out / 'grades.json'}, "
          f"{out / 'feedback' / 'index.html'}; formgrader's {out / 'submitted'}/ and "
          f"{out / 'autograded'}/.")
    if waiting:
        print(f"{waiting} row(s) wait for hand grading: formgrader with {GRADEBOOK_ENV} set "
              "to this gradebook (docs/cluster.md), then course collect again.")
    return 0


def _cluster_check(args) -> int:
    from ..paths import course_root
    from .cluster import read_nodes, script_request, verdict

    script = Path(args.script) if args.script else course_root() / "docs/cluster/grade.slurm"
    request = script_request(script, args.cpus_per_task, args.mem, args.partition)
    fits, line = verdict(request, read_nodes())
    print(line, file=sys.stdout if fits else sys.stderr)
    return 0 if fits else 1


def add_commands(commands) -> None:
    """Add both commands to ``course``'s sub-command parsers."""
    collect = commands.add_parser(
        "collect", help="after `course grade --shard`: check every shard and student is graded "
                        "(or say how to grade what is missing), then write the whole class's "
                        "grades.csv, grades.json and feedback from the gradebook")
    collect.add_argument("--out", default="grading-output",
                         help="the class's folder: the shards' --out (shard-*/ inside)")
    collect.add_argument("--db", default=os.environ.get(GRADEBOOK_ENV),
                         help=f"gradebook URL (default: ${GRADEBOOK_ENV}, else the one the "
                              "shards recorded, password left out)")
    collect.add_argument("--submissions", help="default: the folder the shards graded")
    collect.add_argument("--roster", metavar="STUDENTS_CSV",
                         help="nbgrader's student CSV: names, and rows for who submitted nothing")
    collect.add_argument("--check", action="store_true",
                         help="only check: exit 0 when complete, 1 with what is missing")
    collect.set_defaults(run=_collect)

    fit = commands.add_parser(
        "cluster-check", help="before sbatch: whether one task of the grading script fits a "
                              "node of this Slurm cluster (CPUs and memory, from sinfo)")
    fit.add_argument("--script", help="the job script whose #SBATCH lines to read (default: "
                                      "the course's docs/cluster/grade.slurm)")
    fit.add_argument("--cpus-per-task", type=int, help="as given to sbatch (overrides the script)")
    fit.add_argument("--mem", help="as given to sbatch, e.g. 8G (overrides the script)")
    fit.add_argument("--partition", help="as given to sbatch (default: the script's, or any)")
    fit.set_defaults(run=_cluster_check)
