"""Grades a folder of submitted lab notebooks: a score per TODO, from the real check cells.

For each submission (`*.ipynb` in the folder):
1. Identify its lab (notebook metadata, else the title), and rebuild it from the current
   generated lab: every protected cell (set-up, parameters, text, checks) comes from the
   lab; only the learner's TODO cells come from the submission. Before each check cell, the
   checks are reloaded, so a TODO cell that replaced or redefined them changes nothing.
2. Inject the small test parameters and run it with nbval (`--nbval-lax`, a per-cell
   timeout, the current environment) in its own process and its own temporary folder
   (working directory, home and data cache), with JUnit XML output and an overall timeout.
3. Score each TODO from its check cell: passed, or failed with the first line of its error.

Writes `scores.csv`, `scores.md` and one JUnit XML per submission to the output folder.
The exit status says whether grading itself worked (0), not whether students passed.

Usage:
    python -m tools.grade submissions/ --output-dir build/grades
"""

from __future__ import annotations

import argparse
import copy
import csv
import dataclasses
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import nbformat

from tools import build_notebooks as build
from tools.lesson_parameters import SMALL_PARAMETERS

REPO_ROOT = Path(__file__).resolve().parents[1]
KEY = build.METADATA_KEY
# Runs before every check cell: reload the check modules (`_base` first, then the others,
# then the package), so that the real checks decide even if a TODO cell replaced them.
RELOAD_CHECKS = """\
import importlib as _grader_importlib, sys as _grader_sys
for _grader_name in sorted(n for n in list(_grader_sys.modules) if n.startswith("utils.checks.")):
    _grader_importlib.reload(_grader_sys.modules[_grader_name])
checks = _grader_importlib.reload(_grader_importlib.import_module("utils.checks"))
"""
_TITLE = re.compile(r"^#\s*(?:Lab|Lesson)\s+(\d+)\b", re.MULTILINE)


@dataclasses.dataclass
class Grade:
    """The grading of one submission."""

    submission: str
    lab: str = ""
    status: str = "graded"
    todos: dict[int, bool] = dataclasses.field(default_factory=dict)
    messages: dict[int, str] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.todos.values())


def identify_lab(notebook: nbformat.NotebookNode, labs: dict[str, nbformat.NotebookNode]):
    """Returns the lesson name (`01_tf_data_basics`) of a submission, or None if unknown."""
    source = notebook.metadata.get(KEY, {}).get("source", "")
    if Path(source).stem in labs:
        return Path(source).stem
    for cell in notebook.cells[:3]:
        match = _TITLE.search(cell.source) if cell.cell_type == "markdown" else None
        if match:
            found = [name for name in labs if name.startswith(f"{int(match.group(1)):02d}_")]
            return found[0] if found else None
    return None


def restore_protected_cells(submission: nbformat.NotebookNode, lab: nbformat.NotebookNode):
    """Returns the lab with the submission's TODO cells in it, and notes on what was missing.

    A TODO cell is matched by its TODO number (cell metadata), else by cell id. Every
    other cell is the lab's own. Each check cell first reloads the checks.
    """
    by_todo, by_id = {}, {}
    for cell in submission.cells:
        todo = cell.get("metadata", {}).get(KEY, {}).get("todo")
        if todo is not None and cell.cell_type == "code":
            by_todo.setdefault(todo, cell)
        by_id[cell.get("id")] = cell
    restored, notes = copy.deepcopy(lab), []
    for cell in restored.cells:
        marks = cell.metadata.get(KEY, {})
        if "todo" in marks:
            theirs = by_todo.get(marks["todo"]) or by_id.get(cell.id)
            if theirs is None or theirs.cell_type != "code":
                notes.append(f"TODO {marks['todo']}: no cell found in the submission")
                continue
            cell.source = theirs.source
        elif "check" in marks:
            cell.source = RELOAD_CHECKS + cell.source
    return restored, notes


def inject_parameters(notebook: nbformat.NotebookNode, parameters: dict):
    """Returns the notebook with a cell setting `parameters` after its `parameters` cell."""
    notebook = copy.deepcopy(notebook)
    index = next(
        i for i, cell in enumerate(notebook.cells) if "parameters" in cell.metadata.get("tags", [])
    )
    source = "# Parameters injected by the grader\n" + "\n".join(
        f"{name} = {value!r}" for name, value in parameters.items()
    )
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]})
    cell.id = "injected-parameters"
    notebook.cells.insert(index + 1, cell)
    return notebook


def _nbval_command(notebook: Path, junit: Path, cell_timeout: int) -> list[str]:
    return [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
        "--nbval-current-env", "--nbval-cell-timeout", str(cell_timeout),
        f"--junitxml={junit}", "-o", "junit_family=xunit1", str(notebook),
    ]  # fmt: skip


def run_nbval(notebook: Path, junit: Path, *, cell_timeout: int, timeout: int) -> str | None:
    """Runs nbval over `notebook` in its own folder and process; returns None, or why not."""
    folder = notebook.parent
    env = {
        **os.environ,
        "HOME": str(folder),
        "TPU_SPEED_PIPELINES_CACHE": str(folder / "cache"),
        "TPU_SPEED_PIPELINES_NO_PROGRESS": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        "PYTHONPATH": str(REPO_ROOT),
        "MPLBACKEND": "Agg",
    }
    process = subprocess.Popen(
        _nbval_command(notebook, junit, cell_timeout),
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return f"timed out after {timeout} s"
    return None


def parse_junit(junit: Path) -> dict[int, tuple[bool, str]]:
    """Returns {code cell index: (passed, why not)} from nbval's JUnit XML; skipped fails."""
    if not junit.exists():
        return {}
    results = {}
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        match = re.search(r"Cell (\d+)", case.get("name", ""))
        if not match:
            continue
        # nbval skips the cells after one that timed out or killed the kernel.
        outcome = next((case.find(tag) for tag in ("failure", "error", "skipped")
                        if case.find(tag) is not None), None)  # fmt: skip
        if outcome is None:
            results[int(match.group(1))] = (True, "")
        elif outcome.tag == "skipped":
            results[int(match.group(1))] = (False, f"not run: {outcome.get('message', '')}")
        else:
            results[int(match.group(1))] = (False, _first_error_line(outcome))
    return results


def _first_error_line(failure: ElementTree.Element) -> str:
    text = (failure.text or "") + "\n" + (failure.get("message") or "")
    text = re.sub(r"(\x1b|#x1B)\[[0-9;]*m", "", text)  # Colours, as nbval writes them.
    for pattern in (r"CheckFailed: (.+)", r"(\w+Error: .+)", r"(Timeout.+|.*[Tt]imed out.+)"):
        match = re.search(pattern, text)
        if match:
            return match.group(1).strip()[:300]
    return (failure.get("message") or "failed").strip().splitlines()[0][:300]


def grade_submission(
    path: Path,
    labs: dict[str, nbformat.NotebookNode],
    output_dir: Path,
    *,
    cell_timeout: int,
    timeout: int,
) -> Grade:
    """Grades one submission; never raises for a bad submission."""
    grade = Grade(submission=path.name)
    try:
        submission = nbformat.read(path, as_version=4)
    except Exception as error:  # Not JSON, not a notebook: a bad submission, not a crash.
        grade.status = f"unreadable: {type(error).__name__}: {str(error).splitlines()[0][:120]}"
        return grade
    lesson = identify_lab(submission, labs)
    if lesson is None:
        grade.status = "unknown lab: no course metadata and no 'Lab N' or 'Lesson N' title"
        return grade
    grade.lab = lesson
    lab = labs[lesson]
    todos = [c.metadata[KEY]["todo"] for c in lab.cells if "todo" in c.metadata.get(KEY, {})]
    restored, grade.notes = restore_protected_cells(submission, lab)
    restored = inject_parameters(restored, SMALL_PARAMETERS[lesson])
    code_cells = [cell for cell in restored.cells if cell.cell_type == "code"]
    check_cells = {  # nbval numbers code cells from 0: "Cell 6" is the 7th code cell.
        index: cell.metadata[KEY]["check"]
        for index, cell in enumerate(code_cells)
        if "check" in cell.metadata.get(KEY, {})
    }
    with tempfile.TemporaryDirectory(prefix="grade-") as folder:
        notebook_path = Path(folder) / f"{lesson}.ipynb"
        nbformat.write(restored, notebook_path)
        junit = output_dir / f"{path.stem}.junit.xml"
        problem = run_nbval(notebook_path, junit, cell_timeout=cell_timeout, timeout=timeout)
    if problem:
        grade.status = problem
    results = parse_junit(junit)
    for index, todo in check_cells.items():
        passed, message = results.get(index, (False, problem or "not run"))
        grade.todos[todo] = passed
        if not passed:
            grade.messages[todo] = message or "failed"
    for todo in todos:
        grade.todos.setdefault(todo, False)
    return grade


def write_reports(grades: list[Grade], output_dir: Path) -> None:
    """Writes scores.csv and scores.md: one row per submission, one column per TODO."""
    max_todo = max([max(g.todos, default=0) for g in grades] + [0])
    columns = [f"TODO {n}" for n in range(1, max_todo + 1)]
    with open(output_dir / "scores.csv", "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["submission", "lab", "status", *columns, "total", "first errors"])
        for grade in grades:
            marks = [_mark(grade, n) for n in range(1, max_todo + 1)]
            errors = "; ".join(f"TODO {n}: {m}" for n, m in sorted(grade.messages.items()))
            writer.writerow(
                [grade.submission, grade.lab, grade.status, *marks, grade.total, errors]
            )
    lines = [
        "| submission | lab | status | " + " | ".join(columns) + " | total |",
        "|" + " --- |" * (len(columns) + 4),
    ]
    for grade in grades:
        marks = " | ".join(_mark(grade, n) for n in range(1, max_todo + 1))
        total = f"{grade.total}/{len(grade.todos)}" if grade.todos else "0"
        lines.append(f"| {grade.submission} | {grade.lab} | {grade.status} | {marks} | {total} |")
    lines.append("")
    for grade in grades:
        for todo, message in sorted(grade.messages.items()):
            lines.append(f"- {grade.submission}, TODO {todo}: {message}")
        for note in grade.notes:
            lines.append(f"- {grade.submission}: {note}")
    (output_dir / "scores.md").write_text("\n".join(lines) + "\n")


def _mark(grade: Grade, todo: int) -> str:
    if todo not in grade.todos:
        return ""
    return "pass" if grade.todos[todo] else "fail"


def load_labs(root: Path = REPO_ROOT) -> dict[str, nbformat.NotebookNode]:
    """Returns the current generated labs, by lesson name."""
    return {
        path.stem: nbformat.read(path, as_version=4) for path in sorted(root.glob("labs/*.ipynb"))
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", type=Path, help="folder of submitted .ipynb files")
    parser.add_argument("--output-dir", type=Path, default=REPO_ROOT / "build" / "grades")
    parser.add_argument("--cell-timeout", type=int, default=300, help="seconds per cell")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds per submission")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        print(f"error: {args.submissions} is not a folder of notebooks", file=sys.stderr)
        return 2
    paths = sorted(args.submissions.glob("*.ipynb"))
    if not paths:
        print(f"error: no .ipynb files in {args.submissions}", file=sys.stderr)
        return 2
    shutil.rmtree(args.output_dir, ignore_errors=True)
    args.output_dir.mkdir(parents=True)
    labs = load_labs()
    grades = []
    for path in paths:
        print(f"Grading {path.name} ...", flush=True)
        grades.append(
            grade_submission(
                path, labs, args.output_dir, cell_timeout=args.cell_timeout, timeout=args.timeout
            )
        )
    write_reports(grades, args.output_dir)
    print((args.output_dir / "scores.md").read_text())
    print(f"Wrote {args.output_dir / 'scores.csv'} and {args.output_dir / 'scores.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
