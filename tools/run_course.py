"""Runs every lesson headless and prints what each one measured.

Steps:
1. Build the embedded dataset if it is not cached yet (the first lesson does it).
2. Execute each solution in solutions/ with papermill, in order, with its default
   parameters (or `-p NAME VALUE` overrides), writing the executed copies to build/course/.
   A path given as DATA_SOURCE, OUTPUT_DIR or SHARDS_DIR is read as typed: `~` expanded,
   relative to the folder the command runs in (the notebooks get it absolute).
   A line of progress is printed at least every 30 s while a lesson runs.
   A lesson that fails gets one line (which cell, which error) and its executed copy is
   written beside the last good one (`NAME.failed.ipynb`), never over it; the other
   lessons still run, and the exit status is 1.
3. Print the text output of each lesson's cell tagged `summary` ("What you measured").

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
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import nbformat

from tools.lesson_parameters import KERNEL_OPTIONS, beam_install_command, missing_modules
from utils import progress

REPO_ROOT = Path(__file__).resolve().parents[1]
# Parameters that may name a local folder; the notebooks run in solutions/, so a relative
# path is made absolute here, from where the command runs.
PATH_PARAMETERS = ("DATA_SOURCE", "OUTPUT_DIR", "SHARDS_DIR")
# Sources that are names, not folders.
NAMED_SOURCES = ("embedded", "flower_photos")
HEARTBEAT_SECONDS = 30


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


class Heartbeat:
    """Prints a line every `every_seconds` while a lesson runs, naming the cell it is in.

    Papermill saves the notebook it executes as cells run; the line reads the cell that
    is running from that copy, when it can.
    """

    def __init__(self, name: str, running: Path, every_seconds: float | None = None):
        self.name, self.running = name, running
        self.every_seconds = HEARTBEAT_SECONDS if every_seconds is None else every_seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._start = time.monotonic()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self.every_seconds):
            elapsed = int(time.monotonic() - self._start)
            print(f"  {self.name}: still running, {elapsed // 60} m {elapsed % 60:02d} s"
                  f"{self._where()}", flush=True)  # fmt: skip

    def _where(self) -> str:
        """ ", cell N of M" from the copy papermill saved, or "" if it cannot be read."""
        try:
            cells = json.loads(self.running.read_text())["cells"]
        except (OSError, ValueError, KeyError):
            return ""
        code = [c for c in cells if c.get("cell_type") == "code"]
        for number, cell in enumerate(code, 1):
            if cell.get("metadata", {}).get("papermill", {}).get("status") == "running":
                return f", cell {number} of {len(code)}"
        return ""


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
        with Heartbeat(solution.stem, running):
            papermill.execute_notebook(
                str(solution),
                str(running),
                parameters=parameters,
                cwd=str(solution.parent),
                progress_bar=False,
                **KERNEL_OPTIONS,
            )
    except papermill.PapermillExecutionError as error:
        failed = running.replace(output.with_suffix(".failed.ipynb"))
        first_line = (error.evalue.strip().splitlines() or [""])[0]
        raise LessonFailed(
            f"{solution.stem} stopped in cell {error.exec_count}: {error.ename}: {first_line} "
            f"(the run with the error: {os.path.relpath(failed)})"
        ) from None
    return nbformat.read(running.replace(output), as_version=4)


@contextlib.contextmanager
def kernels_temporary_folder() -> Iterator[Path]:
    """Points TMPDIR (the kernels' and this process's) at a new folder; removes it at the end.

    A SIGTERM (`timeout`, a CI job cancelled) ends the run like Ctrl-C does, so that the
    kernel is shut down and the folder removed then too.
    """
    previous, previous_tempdir = os.environ.get("TMPDIR"), tempfile.tempdir
    try:
        previous_handler = signal.signal(signal.SIGTERM, _interrupt)
    except ValueError:  # Not the main thread: leave SIGTERM alone.
        previous_handler = None
    with tempfile.TemporaryDirectory(prefix="tpu_speed_pipelines_course-") as folder:
        os.environ["TMPDIR"] = tempfile.tempdir = folder  # Kernels' connection files too.
        try:
            yield Path(folder)
        finally:
            tempfile.tempdir = previous_tempdir
            if previous_handler is not None:
                signal.signal(signal.SIGTERM, previous_handler)
            if previous is None:
                del os.environ["TMPDIR"]
            else:
                os.environ["TMPDIR"] = previous


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


class LessonFailed(Exception):
    """A lesson's notebook raised; the message is one line."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run only the lessons whose file name starts so")
    parser.add_argument("-p", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"))
    parser.add_argument("--output-dir", type=Path, default=REPO_ROOT / "build" / "course")
    args = parser.parse_args(argv)
    os.environ.setdefault(progress.DISABLE_ENV_VAR, "1")
    args.output_dir.mkdir(parents=True, exist_ok=True)
    solutions = sorted((REPO_ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
    solutions = [s for s in solutions if args.only is None or s.name.startswith(args.only)]
    if not solutions:
        print(f"No lesson matches --only {args.only!r} in solutions/.", file=sys.stderr)
        return 1
    parameters = absolute_paths(parse_parameters(args.p))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # For the kernels, before TF starts.
    try:
        with kernels_temporary_folder():
            failures = run_lessons(solutions, args.output_dir, parameters)
    except KeyboardInterrupt:
        print("Stopped (Ctrl-C or SIGTERM); the kernels' temporary folder is removed.")
        return 130
    return 1 if failures else 0


def run_lessons(solutions: list[Path], output_dir: Path, parameters: dict) -> int:
    """Runs each lesson and prints what it measured; returns the number that failed."""
    failures = 0
    for solution in solutions:
        missing = missing_modules(solution.stem)
        if missing:
            print(f"Skipping {solution.stem}: it needs {', '.join(missing)} "
                  f"({beam_install_command()}).\n", flush=True)  # fmt: skip
            continue
        print(f"Running {solution.stem} ...", flush=True)
        try:
            executed = run_lesson(solution, output_dir, parameters)
        except LessonFailed as failure:
            print(f"{failure}\n", flush=True)
            failures += 1
            continue
        print(f"\n=== {solution.stem}: what it measured ===")
        print(summary_text(executed) or "(no summary cell)")
        print(f"(executed notebook: {os.path.relpath(output_dir / solution.name)})\n")
    return failures


if __name__ == "__main__":
    sys.exit(main())
