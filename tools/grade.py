"""Grades a folder of submitted lab notebooks: points per TODO, from the real check cells.

1. Copy every submission into the grader's own folder before running any, and warm the
   data cache (outside any sandbox) with the small datasets the labs will read.
2. Time limits per lesson, from its solution's own run in the sandbox (cached per lesson
   source): each cell gets `CELL_MULTIPLE` times its solution time (at least `CELL_FLOOR`
   s), the submission `SUBMISSION_MULTIPLE` times the solution's total (at least
   `SUBMISSION_FLOOR` s); printed. `--cell-timeout` / `--timeout` set them instead. The
   same run bounds what a submission may write in its `/tmp` and in its work folder
   (`workfolder.DISK_MULTIPLE` times what the solution wrote, at least 1 GB and 2 GB);
   `--disk-gb` sets both instead.
3. For each submission: its learner id (`--id-pattern` on the file name, else the file
   name; a notebook whose metadata names another learner is flagged), its lab and version
   (graded against the lab of its version where `labs/` or `--releases` holds it, else the
   current one, in one line). Rebuild it on that lab, as nbgrader does: every protected
   cell (set-up, parameters, text, checks) comes from the lab; the learner's TODO cells
   (found by metadata, stable id `todo-n`, or `# TODO n:` line; of two copies the last)
   and added cells stay in place.
4. Run the learner's cells, without the lab's check calls, one by one in a kernel
   sandboxed with bubblewrap (`tools/grading/kernel/grade_kernel.py`): only the virtual environment,
   Python, `utils/`, the grader's kernel side (`grading/kernel/inside/`) and the data cache
   are there (no solutions, lesson sources or git history), no network, its own PID
   namespace, a memory limit. After each TODO the kernel
   keeps what the TODO made; the judge, a second sandboxed process that never runs learner
   code, runs the lab's checks on those values and signs its verdicts (`grading/judge/`).
   A cell past its limit, or a submission past its disk bounds, stops the run; the TODOs
   judged before it are kept. Everything the cells print is read as it comes (the
   feedback says where it was cut); the work folders are deleted when the run ends.
5. Score each TODO from the judge's verdict; a TODO cell's own error is reported for that
   TODO. Flag what the learner's code does that the instructor should read (`FLAG_NAMES`),
   in `review.md` (`--review` prints it).

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

import concurrent.futures
import os
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from tools.grading.classroom import arguments, class_files, gradebook
from tools.grading.classroom.limits import measure_limits
from tools.grading.classroom.lms_files import write_canvas_csv, write_moodle_csv
from tools.grading.classroom.reports import remove_old_reports, write_reports
from tools.grading.kernel import course_seal, sandbox
from tools.grading.model import REPO_ROOT, Grade, Options, Submission
from tools.grading.submission import flags, identify, prepare, restore, run, versions
from tools.grading.submission import score as scoring
from tools.grading.submission.identify import identify_lab, learner_id
from tools.grading.submission.prepare import grader_parameters
from tools.grading.submission.versions import load_labs
from utils.lab import data

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


def grade_submission(
    path: Path, labs: dict, limits: dict, options: Options, id_pattern: str | None = None
) -> Grade:
    """Grades one submission (a copy the grader owns) by `STEPS`; never raises.

    A step that raises (a bug of the grader's, or a submission it did not foresee) ends
    this submission's grading with the status `grader error: <step>: <error>`, and the
    class's other submissions are graded as usual.
    """
    started = time.perf_counter()
    submission = Submission(
        path=path,
        labs=labs,
        limits=limits,
        options=options,
        id_pattern=id_pattern,
        grade=Grade(submission=path.name, learner=learner_id(path, id_pattern)),
    )
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
        parameters = grader_parameters(lesson)
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
            "bwrap (as nobody in its own user namespace, no capability; only the venv, "
            "Python, utils/ and the data cache, read-only; no solutions, sources or other "
            "submissions; private work folder and /tmp, no network, own PID namespace, "
            "memory limit)"
        )
    return None, "NOT ISOLATED (--sandbox none)"


def main(argv: list[str] | None = None) -> int:
    parser = arguments.parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--disk-gb",
        type=float,
        default=None,
        help="GB a submission may write in its /tmp and in its work folder, each (default: "
        "from the lesson's solution, at least 1 GB and 2 GB)",
    )
    args = parser.parse_args(argv)
    # The seal fingerprints the venv: the grader's own first imports must not write
    # `__pycache__` files into it (a fresh venv, as the replicas' copies are, has none yet).
    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # Nor its processes outside a sandbox.
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
    if args.disk_gb is not None and not args.disk_gb > 0:
        print(f"error: --disk-gb must be more than 0; got {args.disk_gb:g}", file=sys.stderr)
        return 2
    bwrap, isolation = choose_sandbox(args.sandbox)
    if args.sandbox != "none" and bwrap is None:
        print(
            f"error: no sandbox, so nothing was graded: {sandbox.bwrap_fix()}. To grade "
            "unsandboxed all the same (only work you trust): --sandbox none",
            file=sys.stderr,
        )
        return 2
    if bwrap is None:
        print(
            f"WARNING: {isolation}: submissions can read and write your files, the course "
            "and each other's; grade only work you trust.",
            file=sys.stderr,
        )
    print(f"Sandbox: {isolation}", flush=True)
    output_dir.mkdir(parents=True, exist_ok=True)
    remove_old_reports(output_dir)  # Only what an earlier grading wrote; nothing else.
    labs = load_labs(REPO_ROOT, args.releases)
    try:
        book = arguments.class_inputs(args, labs["current"])
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
                lesson = identify_lab(
                    nbformat.read(copies / path.name, as_version=4), labs["current"]
                )
            except Exception:
                continue
            if lesson:
                lessons.add(lesson)
        options = Options(
            course=sandbox.copy_course(Path(workspace) / "course") if bwrap else None,
            cell_timeout=args.cell_timeout,
            timeout=args.timeout,
            memory_gb=args.memory_gb,
            bwrap=bwrap,
            cache=warm_cache(lessons),
            work_root=Path(workspace) / "work",
        )
        limits = {}
        for lesson in sorted(lessons):
            limits[lesson] = measure_limits(
                lesson, labs["current"][lesson], options, disk_gb=args.disk_gb
            )
            print(f"Limits for {lesson}: {limits[lesson].why}", flush=True)
        seal = course_seal.CourseSeal(
            [(options.course or REPO_ROOT) / name for name in sandbox.COURSE_FOLDERS],
            [Path(sys.prefix), *options.cache.glob("flowers-embedded-*")],
        )

        def graded(path: Path) -> Grade:
            seal.started(path.name)
            grade = grade_submission(path, labs, limits, options, args.id_pattern)
            seal.verify(path.name)
            return grade

        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            jobs = [pool.submit(graded, copies / path.name) for path in paths]
            grades = []
            for path, job in zip(paths, jobs, strict=True):
                try:
                    grades.append(job.result())
                except course_seal.CourseChanged as error:
                    pool.shutdown(cancel_futures=True)
                    print(f"error: {error}", file=sys.stderr)
                    return 3
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
    print(
        f"Wrote {output_dir / 'grades.csv'}, scores.md, review.md and "
        f"{len(grades)} files in {output_dir / 'feedback'}"
    )
    print(
        f"{count} submissions in {elapsed:.0f} s with -j {args.jobs}: "
        f"{elapsed / count:.1f} s per submission"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
