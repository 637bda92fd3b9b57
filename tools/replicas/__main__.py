"""`python -m tools.replicas [--only NAME ...] [--full] [--keep]`: each replica, its plan run.

In a replica with TensorFlow, the grader's checks of TensorFlow, Keras and Grain
(`internals_check.py`) run first; after its plan, its core labs are graded
(`runs.GRADED`: each solution full marks, each blank lab zero).

Each replica's venv comes from the cache (`$TPU_SPEED_PIPELINES_REPLICAS`, else
~/.cache/tpu_speed_pipelines/replicas/), or is built there from its list first. A replica
that cannot be built says so in one line, naming the package, and fails the command. The
work folders (venv copies of hard links, the notebooks, empty HOMEs) are removed at the
end unless --keep. Prints a table: replica, what ran, passed or failed, minutes; exits 1
if any row failed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from tools.replicas import environments, execute
from tools.replicas import runs as planned


def table(rows: list[execute.Result]) -> str:
    """Returns the rows as a plain-text table, failures with their reason below."""
    width = max(len(row.what) for row in rows)
    lines = [f"{'replica':<11} {'what ran':<{width}} {'result':<7} minutes"]
    for row in rows:
        result = "passed" if row.passed else "FAILED"
        lines.append(f"{row.replica:<11} {row.what:<{width}} {result:<7} {row.minutes:7.1f}")
        if row.detail:
            lines.append(f"{'':<11}   {row.detail}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.replicas", description=__doc__)
    names = [replica.name for replica in environments.replicas()]
    parser.add_argument("--only", nargs="+", choices=names, help="these replicas alone")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument(
        "--full", action="store_true", help="run all the issue asks (runs.FULL_PLANS), not CI's cut"
    )
    options = parser.parse_args(argv)
    cache = environments.cache_folder()
    work = Path(tempfile.mkdtemp(prefix="replicas-"))
    rows = []
    try:
        for replica in environments.replicas():
            if options.only and replica.name not in options.only:
                continue
            print(
                f"{replica.name}: {replica.header['platform']}, list of {replica.header['date']}",
                flush=True,
            )
            first = len(rows)
            try:
                venv, minutes = execute.timed(environments.build, replica, cache)
            except environments.ReplicaUnbuildable as error:
                print(error, flush=True)
                rows.append(execute.Result(replica.name, "build the venv", False, 0.0, str(error)))
                continue
            rows.append(execute.Result(replica.name, f"venv {venv.name}", True, minutes))
            if any(venv.glob("lib/python*/site-packages/tensorflow")):
                rows += execute.internals_rows(replica.name, venv / "bin" / "python")
            plan = (planned.FULL_PLANS if options.full else planned.PLANS)[replica.name]()
            rows += execute.run_replica(replica.name, venv, plan, work / replica.name, cache)
            graded = (planned.FULL_GRADED if options.full else planned.GRADED).get(replica.name)
            if graded:
                grading = work / f"{replica.name}-grading"
                rows += execute.grade_replica(replica.name, venv, graded, grading, cache)
            print(table(rows[first:]), flush=True)
    finally:
        if options.keep:
            print(f"Work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(table(rows))
    failed = sum(not row.passed for row in rows)
    print(f"{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
