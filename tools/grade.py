"""Grades a folder of submitted lab notebooks: points per TODO, from the real check cells.

1. Copy every submission into the grader's own folder before running any, and warm the
   data cache (outside any sandbox) with the small datasets the labs will read.
2. Time limits per lesson, from its solution's own run in the sandbox (cached per lesson
   source): each cell gets `CELL_MULTIPLE` times its solution time (at least `CELL_FLOOR`
   s), the submission `SUBMISSION_MULTIPLE` times the solution's total (at least
   `SUBMISSION_FLOOR` s); printed. `--cell-timeout` / `--timeout` set them instead.
3. For each submission: its learner id (`--id-pattern` on the file name, else the
   notebook's metadata, else the file name), its lab and version (graded against the lab of
   its version where `labs/` or `--releases` holds it, else the current one, in one line).
   Rebuild it on that lab, as nbgrader does: every protected cell (set-up, parameters,
   text, checks) comes from the lab; the learner's TODO cells (found by metadata, stable
   id `todo-n`, or `# TODO n:` line; of two copies the last) and added cells stay in place.
   Each check cell starts with the lab's parameters as literals and a guard that restores
   the course's modules, `sys.path`, patched functions of numpy/TF/Keras and IPython hooks.
4. Run the cells one by one in a kernel sandboxed with bubblewrap (`tools/grade_kernel.py`):
   only the virtual environment, Python, `utils/` and the data cache are there (no
   solutions, lesson sources or git history), no network, its own PID namespace, a memory
   limit. The grader reads each cell's result from the kernel's replies, in its own memory.
   A cell past its limit stops the run; the TODOs passed before it are kept.
5. Score each TODO from its check cell (passed only if the check printed "TODO n passed");
   a TODO cell's own error is reported for that TODO. Flag what cannot be prevented
   (`FLAG_NAMES`) for the instructor, who reads `review.md` (`--review` prints it).

Writes to the output folder (which must not be or contain the submissions folder):
`grades.csv` (one row per submission: learner, lab, version, points per TODO, total,
maximum, flags), `scores.md` (the instructor's table), `feedback/<learner>-<lab>.md` (one
file per submission, for the learner), `junit/<learner>-<lab>.xml` (a test case per TODO)
and `review.md` (flagged submissions' code, diffed
against the lab). The exit status says whether grading itself worked (0), not whether
students passed.

Each step is one module of `tools/grading/` (its docstring says what it takes and gives);
`STEPS` below lists them in order, as nbgrader's converters list their preprocessors.

Usage:
    python -m tools.grade submissions/ --output-dir build/grades [-j N] [--review]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from tools import sandbox
from tools.grading import class_files, flags, gradebook, identify, prepare, restore, run, versions
from tools.grading import score as scoring
from tools.grading.feedback import feedback, junit_xml
from tools.grading.flags import COURSE_MODULES, FLAG_NAMES, FLAGS, find_flags, review_diff
from tools.grading.identify import identify_lab, learner_id
from tools.grading.limits import measure_limits
from tools.grading.lms_files import write_canvas_csv, write_moodle_csv
from tools.grading.model import KEY, REPO_ROOT, Grade, Limits, Options, Submission
from tools.grading.prepare import lab_names, lab_parameters, prepare_cells
from tools.grading.reports import GRADER_FILES, remove_old_reports, write_reports
from tools.grading.restore import learner_cells, restore_protected_cells
from tools.grading.score import score
from tools.grading.versions import choose_lab, lab_points, load_labs
from tools.lesson_parameters import SMALL_PARAMETERS
from utils import data

# The steps of one submission, in order; a step that returns False ends its grading.
STEPS = (
    ("read", identify.read),
    ("identify", identify.identify),
    ("choose_lab", versions.step),
    ("restore", restore.step),
    ("flag", flags.step),
    ("prepare", prepare.step),
    ("run", run.step),
    ("score", scoring.step),
)
__all__ = [
    "COURSE_MODULES", "FLAGS", "FLAG_NAMES", "GRADER_FILES", "KEY", "REPO_ROOT", "STEPS",
    "Grade", "Limits", "Options", "choose_lab", "feedback", "find_flags", "grade_submission",
    "identify_lab", "junit_xml", "lab_names", "lab_parameters", "learner_cells", "learner_id",
    "load_labs", "main", "prepare_cells", "restore_protected_cells", "review_diff", "score",
    "write_reports",
]  # fmt: skip


def grade_submission(path: Path, labs: dict, limits: dict, options: Options,
                     id_pattern: str | None = None) -> Grade:  # fmt: skip
    """Grades one submission (a copy the grader owns) by `STEPS`; never raises.

    A step that raises (a bug of the grader's, or a submission it did not foresee) ends
    this submission's grading with the status `grader error: <step>: <error>`, and the
    class's other submissions are graded as usual.
    """
    started = time.perf_counter()
    submission = Submission(
        path=path, labs=labs, limits=limits, options=options, id_pattern=id_pattern,
        grade=Grade(submission=path.name, learner=learner_id(path, None, id_pattern)),
    )  # fmt: skip
    for name, step in STEPS:
        try:
            if not step(submission):
                break
        except Exception as error:  # One submission's failure is its own row, not the class's.
            submission.grade.status = f"grader error: {name}: {type(error).__name__}: {error}"
            submission.grade.passed.clear()  # No partial verdict: the row says what happened.
            break
    submission.grade.seconds = time.perf_counter() - started
    return submission.grade


def warm_cache(lessons: set[str]) -> Path:
    """Makes, outside any sandbox, the embedded datasets the lessons read; returns the cache."""
    for lesson in sorted(lessons):
        parameters = SMALL_PARAMETERS.get(lesson, {})
        data.make_flowers_dataset(parameters.get("NUM_IMAGES", data.DEFAULT_NUM_IMAGES))
    return data.default_cache_dir()


def output_dir_problem(submissions: Path, output_dir: Path) -> str | None:
    """Why `output_dir` may not be used for these submissions, or None."""
    submissions, output_dir = submissions.resolve(), output_dir.resolve()
    if submissions == output_dir or submissions.is_relative_to(output_dir):
        return (
            f"--output-dir {output_dir} is or contains the submissions folder {submissions}; "
            "choose another folder (nothing was changed)"
        )
    if output_dir.exists() and not output_dir.is_dir():
        return f"--output-dir {output_dir} is a file, not a folder"
    return None


def choose_sandbox(mode: str) -> tuple[str | None, str]:
    """Returns (bwrap path or None, the words the report uses for the isolation)."""
    bwrap = sandbox.find_bwrap() if mode in ("auto", "bwrap") else None
    if bwrap:
        return bwrap, (
            "bwrap (only the venv, Python, utils/ and the data cache, read-only; no "
            "solutions, sources or other submissions; private work folder and /tmp, no "
            "network, own PID namespace, memory limit)"
        )
    if mode == "none":
        return None, "NOT ISOLATED (--sandbox none)"
    return None, "NOT ISOLATED (no working bwrap here)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
        default=os.cpu_count() or 1,
        help="submissions graded at once (default: the core count)",
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
        help="auto: bwrap where it works, else none (loudly)",
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
    parser.add_argument("--review", action="store_true",
                        help="print the flagged submissions' code against the lab")  # fmt: skip
    class_book = parser.add_argument_group("the class's gradebook (docs/grading.md)")
    class_book.add_argument(
        "--roster", type=Path,
        help="CSV of the class (Canvas's gradebook export, or any CSV with an ID column): "
        "every learner gets a row per lab, 'missing' where nothing came; also writes "
        "canvas.csv and moodle.csv",
    )  # fmt: skip
    class_book.add_argument(
        "--due", action="append", default=[], metavar="LAB=WHEN",
        help="a lab's due date, e.g. 01=2026-12-01T23:59 (repeatable)",
    )  # fmt: skip
    class_book.add_argument(
        "--late-penalty", type=float, default=10.0, metavar="PERCENT",
        help="points off per day late, a started day counts (default 10)",
    )  # fmt: skip
    class_book.add_argument("--late-cap", type=float, default=50.0, metavar="PERCENT",
                            help="most points off for lateness (default 50)")  # fmt: skip
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


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.submissions.is_dir():
        print(f"error: {args.submissions} is not a folder of notebooks", file=sys.stderr)
        return 2
    paths = sorted(args.submissions.glob("*.ipynb"))
    if not paths:
        print(f"error: no .ipynb files in {args.submissions}", file=sys.stderr)
        return 2
    output_dir = args.output_dir.resolve()
    problem = output_dir_problem(args.submissions, output_dir)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    if args.jobs < 1:
        print(f"error: -j must be 1 or more; got {args.jobs}", file=sys.stderr)
        return 2
    bwrap, isolation = choose_sandbox(args.sandbox)
    if args.sandbox == "bwrap" and bwrap is None:
        print(f"error: --sandbox bwrap, but {sandbox.bwrap_fix()}", file=sys.stderr)
        return 2
    if bwrap is None:
        fix = f" To isolate: {sandbox.bwrap_fix()}." if args.sandbox == "auto" else ""
        print(f"WARNING: {isolation}: submissions can read and write your files, the course "
              f"and each other's; grade only work you trust.{fix}", file=sys.stderr)  # fmt: skip
    print(f"Sandbox: {isolation}", flush=True)
    output_dir.mkdir(parents=True, exist_ok=True)
    remove_old_reports(output_dir)  # Only what an earlier grading wrote; nothing else.
    labs = load_labs(REPO_ROOT, args.releases)
    try:
        book = class_inputs(args, labs["current"])
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="grader-") as workspace:
        copies = Path(workspace) / "submissions"
        copies.mkdir()
        (Path(workspace) / "work").mkdir()
        for path in paths:  # Every copy is made before any submission runs.
            (copies / path.name).write_bytes(path.read_bytes())
        lessons = set()
        for path in paths:
            try:
                lesson = identify_lab(nbformat.read(copies / path.name, as_version=4),
                                      labs["current"])  # fmt: skip
            except Exception:
                continue
            if lesson:
                lessons.add(lesson)
        options = Options(
            cell_timeout=args.cell_timeout, timeout=args.timeout, memory_gb=args.memory_gb,
            bwrap=bwrap, cache=warm_cache(lessons), work_root=Path(workspace) / "work",
        )  # fmt: skip
        limits = {}
        for lesson in sorted(lessons):
            limits[lesson] = measure_limits(lesson, labs["current"][lesson], options)
            print(f"Time limits for {lesson}: {limits[lesson].why}", flush=True)
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            jobs = [
                pool.submit(
                    grade_submission, copies / path.name, labs, limits, options, args.id_pattern
                )  # fmt: skip
                for path in paths
            ]
            grades = []
            for path, job in zip(paths, jobs, strict=True):
                grades.append(job.result())
                grades[-1].submitted = class_files.submitted_at(path, args.id_pattern)
                print(f"Graded {path.name} in {grades[-1].seconds:.0f} s", flush=True)
    elapsed = time.perf_counter() - started
    count = len(grades)
    grades = gradebook.gradebook(grades, **book)
    write_reports(grades, output_dir, isolation)
    if book["roster"] is not None:
        write_canvas_csv(grades, book["roster"], output_dir / "canvas.csv")
        write_moodle_csv(grades, book["roster"], output_dir / "moodle.csv")
        print(f"Wrote {output_dir / 'canvas.csv'} and moodle.csv for the LMS (docs/grading.md)")
    print((output_dir / "scores.md").read_text())
    if args.review:
        print((output_dir / "review.md").read_text())
    print(f"Wrote {output_dir / 'grades.csv'}, scores.md, review.md and "
          f"{len(grades)} files in {output_dir / 'feedback'}")  # fmt: skip
    print(f"{count} submissions in {elapsed:.0f} s with -j {args.jobs}: "
          f"{elapsed / count:.1f} s per submission")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
