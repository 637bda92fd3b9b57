"""The grader's command line: its options, and the class's gradebook inputs they name.

Takes `sys.argv` (through `parser`); gives the parsed options, and `class_inputs` the
roster, due dates, late rule, overrides and points per lab (`gradebook.py` uses them).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import psutil

from tools.grading.classroom import class_files, gradebook
from tools.grading.model import REPO_ROOT
from tools.grading.submission.versions import lab_points
from utils.machine_load import usable_cores


def default_jobs() -> int:
    """Two submissions per usable core (each waits on the simulated storage and on its judge
    part of its time: on 2 cores, -j 4 graded lab 1 in 5.8-5.9 s a submission, -j 3 in
    6.2-6.4, -j 2 in 7.0-7.2), but no more than one per 2 GiB of free memory."""
    free_gib = psutil.virtual_memory().available / 2**30
    return max(1, min(2 * usable_cores(), int(free_gib // 2)))


def parser(description: str) -> argparse.ArgumentParser:
    """The grader's command line (`python -m tools.grade --help`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("submissions", type=Path, help="folder of submitted .ipynb files")
    parser.add_argument("--output-dir", type=Path, default=REPO_ROOT / "build" / "grades")
    parser.add_argument(
        "--cell-timeout",
        type=float,
        default=None,
        help="seconds per cell (default: from each lesson's solution run)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds per submission (default: from the solution run)",
    )
    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=default_jobs(),
        help="submissions graded at once (default: 2 per usable core, 1 per 2 GiB of free "
        "memory, the fewer; docs/grading.md)",
    )
    parser.add_argument(
        "--memory-gb",
        type=float,
        default=4.0,
        help="memory limit per process of a submission (RLIMIT_DATA)",
    )
    parser.add_argument(
        "--sandbox",
        choices=("auto", "bwrap", "none"),
        default="auto",
        help="auto and bwrap: bwrap, else refuse (saying what to install); none: no "
        "sandbox (only work you trust)",
    )
    parser.add_argument(
        "--id-pattern",
        help="regular expression on the file name; its group "
        "'id' (or 1) is the learner's id, e.g. '^(?P<id>[^_]+)_'",
    )
    parser.add_argument(
        "--releases",
        type=Path,
        default=REPO_ROOT / "releases",
        help="folder of released labs, releases/<version>/NN_*.ipynb",
    )
    parser.add_argument(
        "--review", action="store_true", help="print the flagged submissions' code against the lab"
    )
    class_book = parser.add_argument_group("the class's gradebook (docs/grading.md)")
    class_book.add_argument(
        "--roster",
        type=Path,
        help="CSV of the class (Canvas's gradebook export, or any CSV with an ID column): "
        "every learner gets a row per lab, 'missing' where nothing came; also writes "
        "canvas.csv and moodle.csv",
    )
    class_book.add_argument(
        "--due",
        action="append",
        default=[],
        metavar="LAB=WHEN",
        help="a lab's due date, e.g. 01=2026-12-01T23:59 (repeatable)",
    )
    class_book.add_argument(
        "--late-penalty",
        type=float,
        default=10.0,
        metavar="PERCENT",
        help="points off per day late, a started day counts (default 10)",
    )
    class_book.add_argument(
        "--late-cap",
        type=float,
        default=50.0,
        metavar="PERCENT",
        help="most points off for lateness (default 50)",
    )
    class_book.add_argument(
        "--overrides", type=Path, help="CSV of manual scores: learner, lab, todo, points, reason"
    )
    return parser


def class_inputs(args, labs: dict) -> dict:
    """The gradebook's inputs from the command line; raises ValueError naming a bad one."""
    return {
        "roster": class_files.read_roster(args.roster) if args.roster else None,
        "due": class_files.due_dates(args.due, labs),
        "rule": gradebook.LateRule(percent_per_day=args.late_penalty, cap_percent=args.late_cap),
        "overrides": class_files.read_overrides(args.overrides) if args.overrides else [],
        "points": {name: lab_points(lab) for name, lab in labs.items()},
    }
