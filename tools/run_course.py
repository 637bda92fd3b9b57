"""Runs every lesson headless and prints what each one measured.

Steps:
1. Without `-p`, measure this machine's JPEG decode rate for 2 s and print how long the
   lessons should take here: the build's times scaled by the build machine's rate against
   this one's (tools/course_run/course_summary.py). Then say, in one line, that the error line a
   kernel may log as it is stopped is harmless.
2. Build the embedded dataset the lessons read if it is not cached yet, named, with a
   progress bar on a terminal.
3. Execute each solution in solutions/ with papermill, in order, with its default
   parameters (or `-p NAME VALUE` overrides), writing the executed copies to build/course/.
   A path given as DATA_SOURCE, OUTPUT_DIR or SHARDS_DIR is read as typed: `~` expanded,
   relative to the folder the command runs in (the notebooks get it absolute).
   A line of progress is printed at least every 30 s while a lesson runs, naming the
   heading of the section it is in. A lesson that needs a module that is not installed is
   skipped, and a part of a lesson that will be skipped is named, each with the command
   that installs what is missing.
   A lesson that fails gets one line (which cell, which error) and its executed copy is
   written beside the last good one (`NAME.failed.ipynb`), never over it; the other
   lessons still run, and the exit status is 1.
4. Print the text output of each lesson's cell tagged `summary` ("What you measured").
5. End with one table: the dataset build and each lesson, run, skipped (why) or failed,
   its minutes, and the total.

The kernels get a temporary folder of their own as `TMPDIR`, removed at the end, so that
what they leave there (TensorFlow's `__autograph_generated_file*.py`, a lesson's scratch
folder when its kernel is stopped) does not stay in the system's temporary folder.

Usage:
    python -m tools.run_course
    python -m tools.run_course --only 01 -p NUM_IMAGES 500
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import os
import sys
import time
from pathlib import Path

import nbformat

from tools.building.kernels import KERNEL_OPTIONS
from tools.building.lesson_parameters import install_command, missing_modules
from tools.course_run import course_summary
from tools.course_run.course_summary import Row
from tools.course_run.heartbeat import HEARTBEAT_SECONDS, Heartbeat
from tools.course_run.kernel_environment import environment, kernels_temporary_folder
from utils.lab import data, progress
from utils.lessons.scale_out_reading import host_processes

REPO_ROOT = Path(__file__).resolve().parents[1]
# Parameters that may name a local folder; the notebooks run in solutions/, so a relative
# path is made absolute here, from where the command runs.
PATH_PARAMETERS = ("DATA_SOURCE", "OUTPUT_DIR", "SHARDS_DIR")
# Sources that are names, not folders.
NAMED_SOURCES = ("embedded", "flower_photos")
# Parts of a lesson that skip themselves where a module is missing: the part, and the
# function that says why it will be skipped (None when it will run).
PARTS_THAT_SKIP = {
    "07_scale_out_reading": (
        "its JAX part",
        lambda: host_processes.jax_missing() and f"JAX is not installed ({install_command()}).",
    )
}
CLOCK = time.monotonic  # What the table's minutes are measured with.
# jupyter_client interrupts a kernel before it shuts it down (`shutdown_kernel`); a kernel
# still answering a message then logs "KeyboardInterrupt caught in kernel" as an error, to
# this run's stderr. The kernels here log only what is critical: a cell's error reaches
# the run through papermill (the lesson's one-line failure), a kernel that died too.
RUN_KERNEL_OPTIONS = {**KERNEL_OPTIONS, "extra_arguments": ["--IPKernelApp.log_level=CRITICAL"]}


def summary_text(notebook: nbformat.NotebookNode) -> str:
    """Returns the stdout printed by the cells tagged `summary` of an executed notebook."""
    texts = []
    for cell in notebook.cells:
        if "summary" in cell.metadata.get("tags", []):
            texts += [o.text for o in cell.get("outputs", []) if o.get("name") == "stdout"]
    return "".join(texts).strip()


def parse_parameters(pairs: list[list[str]]) -> dict:
    """Turns `-p NAME VALUE` pairs into a dict, reading VALUE as a Python literal if it is one."""
    parameters = {}
    for name, value in pairs:
        try:
            parameters[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            parameters[name] = value
    return parameters


def absolute_paths(parameters: dict, working_dir: Path | None = None) -> dict:
    """Returns `parameters` with each local path of `PATH_PARAMETERS` made absolute.

    `~` is expanded and a relative path is read from `working_dir` (where the command
    runs), as a shell would; names ("embedded", "flower_photos"), `gs://` paths and
    values that are not strings are kept.

    Args:
        parameters: the `-p` parameters.
        working_dir: the folder relative paths start from; the current one by default.

    Returns:
        A new dict.
    """
    working_dir = Path.cwd() if working_dir is None else working_dir
    resolved = dict(parameters)
    for name in PATH_PARAMETERS:
        value = parameters.get(name)
        if isinstance(value, str) and value and value not in NAMED_SOURCES and "://" not in value:
            path = Path(value).expanduser()
            resolved[name] = str(path if path.is_absolute() else working_dir / path)
    return resolved


def run_lesson(solution: Path, output_dir: Path, parameters: dict) -> nbformat.NotebookNode:
    """Executes one solution notebook into `output_dir` and returns the executed notebook.

    The run writes `NAME.running.ipynb` and renames it to `NAME.ipynb` only when it ends
    well, so a failed run never overwrites the last good executed notebook.

    Raises:
        LessonFailed: naming the cell and the error, the failed copy kept as NAME.failed.ipynb.
    """
    import papermill

    output = output_dir / solution.name
    running = output.with_suffix(".running.ipynb")
    try:
        with Heartbeat(solution.stem, running, HEARTBEAT_SECONDS):
            papermill.execute_notebook(
                str(solution),
                str(running),
                parameters=parameters,
                cwd=str(solution.parent),
                progress_bar=False,
                **RUN_KERNEL_OPTIONS,
            )
    except papermill.PapermillExecutionError as error:
        failed = running.replace(output.with_suffix(".failed.ipynb"))
        first_line = (error.evalue.strip().splitlines() or [""])[0]
        raise LessonFailed(
            f"{solution.stem} stopped in cell {error.exec_count}: {error.ename}: {first_line} "
            f"(the run with the error: {os.path.relpath(failed)})",
            short=f"failed in cell {error.exec_count}: {error.ename}",
        ) from None
    return nbformat.read(running.replace(output), as_version=4)


class LessonFailed(Exception):
    """A lesson's notebook raised; the message is one line, `short` a few words for the table."""

    def __init__(self, message: str, *, short: str):
        super().__init__(message)
        self.short = short


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run only the lessons whose file name starts so")
    parser.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    parser.add_argument("--output-dir", type=Path, default=REPO_ROOT / "build" / "course")
    args = parser.parse_args(argv)
    bars = sys.stderr.isatty() and os.environ.get(progress.DISABLE_ENV_VAR, "") in ("", "0")
    os.environ.setdefault(progress.DISABLE_ENV_VAR, "1")
    solutions = sorted((REPO_ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
    solutions = [s for s in solutions if args.only is None or s.name.startswith(args.only)]
    if not solutions:
        print(f"No lesson matches --only {args.only!r} in solutions/.", file=sys.stderr)
        return 1
    args.output_dir.mkdir(parents=True, exist_ok=True)
    parameters = absolute_paths(parse_parameters(args.p))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # For the kernels, before TF starts.
    runnable = [s for s in solutions if not missing_modules(s.stem)]
    datasets = embedded_datasets(runnable, parameters)
    if parameters:
        expected = course_summary.Estimate(
            None, "No estimate: -p changes the lessons' work from the build's."
        )
    else:
        to_build = [count for count, seed in datasets if not data.is_cached(count, seed=seed)]
        expected = course_summary.estimate(runnable, datasets_to_build=to_build)
    print(expected.text, flush=True)
    print(flush=True)
    try:
        with kernels_temporary_folder():
            rows = build_datasets(datasets, bars=bars)
            rows += run_lessons(solutions, args.output_dir, parameters)
    except KeyboardInterrupt:
        print("Stopped (Ctrl-C or SIGTERM); the kernels' temporary folder is removed.")
        return 130
    print(course_summary.table(rows))
    took = sum(row.seconds for row in rows if row.seconds is not None)
    print(course_summary.against_estimate(expected, took))
    return 1 if any(row.result.startswith("failed") for row in rows) else 0


def lesson_defaults(solution: Path) -> dict:
    """Returns the values a solution's `parameters` cell assigns that are Python literals."""
    values = {}
    for cell in nbformat.read(solution, as_version=4).cells:
        if "parameters" in cell.metadata.get("tags", []):
            for statement in ast.parse(cell.source).body:
                if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name):
                    with contextlib.suppress(ValueError):
                        values[statement.targets[0].id] = ast.literal_eval(statement.value)
    return values


def embedded_datasets(solutions: list[Path], parameters: dict) -> list[tuple[int, int]]:
    """Returns (NUM_IMAGES, SEED) of each embedded dataset the lessons will read, sorted."""
    wanted = set()
    for solution in solutions:
        values = {**lesson_defaults(solution), **parameters}
        if values.get("DATA_SOURCE") == "embedded" and "NUM_IMAGES" in values:
            wanted.add((values["NUM_IMAGES"], values.get("SEED", data.DEFAULT_SEED)))
    return sorted(wanted)


def build_datasets(wanted: list[tuple[int, int]], *, bars: bool) -> list[Row]:
    """Makes each embedded dataset that is not cached yet; returns a table row for each.

    A progress bar shows on a terminal (`bars`); elsewhere the heartbeat's lines do.
    """
    rows = []
    for num_images, seed in wanted:
        name = f"embedded dataset ({num_images:,} images)"
        cache = data.default_cache_dir()
        before = set(cache.iterdir()) if cache.is_dir() else set()
        print(f"Preparing the {name}: built once, then read from {cache} ...", flush=True)
        started = CLOCK()
        bar_or_beat = (
            environment(progress.DISABLE_ENV_VAR, "0")
            if bars
            else Heartbeat("embedded dataset", Path(os.devnull), HEARTBEAT_SECONDS)
        )
        with bar_or_beat:
            root = data.make_flowers_dataset(num_images, seed=seed)
        built = root in set(cache.iterdir()) - before
        rows.append(Row(name, "built" if built else "in the cache", CLOCK() - started))
    return rows


def run_lessons(solutions: list[Path], output_dir: Path, parameters: dict) -> list[Row]:
    """Runs each lesson and prints what it measured; returns a table row for each."""
    rows = []
    for solution in solutions:
        missing = missing_modules(solution.stem)
        if missing:
            print(
                f"Skipping {solution.stem}: it needs {', '.join(missing)} ({install_command()}).\n",
                flush=True,
            )
            rows.append(Row(solution.stem, f"skipped: no {', '.join(missing)}", None))
            continue
        part, why = PARTS_THAT_SKIP.get(solution.stem, ("", lambda: None))
        skipped_part = why()
        if skipped_part:
            print(f"{solution.stem} will skip {part}: {skipped_part}", flush=True)
        print(f"Running {solution.stem} ...", flush=True)
        started = CLOCK()
        try:
            executed = run_lesson(solution, output_dir, parameters)
        except LessonFailed as failure:
            print(f"{failure}\n", flush=True)
            rows.append(Row(solution.stem, failure.short, CLOCK() - started))
            continue
        result = f"ran, without {part}" if skipped_part else "ran"
        rows.append(Row(solution.stem, result, CLOCK() - started))
        print(f"\n=== {solution.stem}: what it measured ===")
        print(summary_text(executed) or "(no summary cell)")
        print(f"(executed notebook: {os.path.relpath(output_dir / solution.name)})\n")
    return rows


if __name__ == "__main__":
    sys.exit(main())
