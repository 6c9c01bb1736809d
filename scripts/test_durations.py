"""Write tests/durations.json: each test file's seconds (setup, calls and teardown) in one run.

`make test-durations` runs the suite with --junitxml and calls this on the report. The suite's
conftest hands files to the xdist workers longest first from this table, so that a long file
does not start last and leave the other workers idle at the end (the suite's wall time is
budgeted: README). Re-measure when files are added or their cost changes much; a file not in
the table is placed as if it took DEFAULT_S.
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "tests" / "durations.json"


def file_seconds(junit_xml: Path) -> dict[str, float]:
    """Seconds per test file (or notebook) from a pytest JUnit XML report."""
    totals: dict[str, float] = defaultdict(float)
    for case in ElementTree.parse(junit_xml).getroot().iter("testcase"):
        name = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
        totals[name.split("::")[0]] += float(case.get("time") or 0.0)
    return dict(totals)


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_file():
        raise SystemExit(f"usage: {Path(__file__).name} JUNIT_XML (a pytest --junitxml report); "
                         f"got {argv!r}")
    totals = {name: round(seconds, 1) for name, seconds in file_seconds(Path(argv[0])).items()
              if (ROOT / name).is_file()}
    ordered = dict(sorted(totals.items(), key=lambda item: -item[1]))
    TABLE.write_text(json.dumps(ordered, indent=1) + "\n")
    print(f"{TABLE.relative_to(ROOT)}: {len(ordered)} files, {sum(ordered.values()):.0f} s "
          f"of worker time; the longest: " + ", ".join(f"{n} {s:.0f} s"
                                                       for n, s in list(ordered.items())[:5]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
