"""Measures the grader's throughput: N copies of lab 1's solution, graded with -j J.

A benchmark, not a test: run it on an idle machine. The data cache is warmed first (one
untimed grading of one copy), so the timing is of grading alone, as the issue's target
("100 lab-1 submissions in <= 10 minutes on 2 cores with -j 2 and a warm cache") asks.

Usage:
    python -m tools.grade_throughput --count 100 -j 2
"""

from __future__ import annotations

import argparse
import csv
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tools import grade
from tools.grading.classroom import arguments
from tools.grading.model import REPO_ROOT
from utils.machine_load import usable_cores

LAB1 = "01_tf_data_basics"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100, help="submissions to grade")
    parser.add_argument("-j", "--jobs", type=int, default=arguments.default_jobs())
    parser.add_argument("--sandbox", choices=("auto", "bwrap", "none"), default="auto")
    args = parser.parse_args(argv)
    solution = REPO_ROOT / "solutions" / f"{LAB1}.ipynb"
    with tempfile.TemporaryDirectory(prefix="grade-throughput-") as scratch:
        submissions, output_dir = Path(scratch) / "submissions", Path(scratch) / "grades"
        submissions.mkdir()
        shutil.copy(solution, submissions / "warm-up.ipynb")
        common = ["--output-dir", str(output_dir), "--sandbox", args.sandbox]
        if grade.main([str(submissions), *common, "-j", "1"]) != 0:
            return 1
        (submissions / "warm-up.ipynb").unlink()
        for number in range(args.count):
            shutil.copy(solution, submissions / f"learner-{number:03d}.ipynb")
        started = time.perf_counter()
        status = grade.main([str(submissions), *common, "-j", str(args.jobs)])
        elapsed = time.perf_counter() - started
        with open(output_dir / "grades.csv") as file:
            full = sum(row["total"] == "4" for row in csv.DictReader(file))
    print(
        f"\n{args.count} lab-1 submissions, -j {args.jobs}, {usable_cores()} usable cores: "
        f"{elapsed:.0f} s in all, {elapsed / args.count:.1f} s per submission; "
        f"{full} of {args.count} got full marks (target: 100 in <= 600 s on 2 cores)"
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
