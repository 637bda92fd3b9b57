"""What the grading steps share: a submission's `Grade`, its `Limits`, the `Options`.

Also the course marks of a cell (`marks`, `todo_of`), which every step reads.
"""

from __future__ import annotations

import ast
import dataclasses
import datetime
import re
import threading
from pathlib import Path

import nbformat

from tools.building.outputs import METADATA_KEY
from tools.building.regions import TODO_LINE

REPO_ROOT = Path(__file__).resolve().parents[2]
KEY = METADATA_KEY
_STABLE_ID = re.compile(r"^(todo|check)-(\d+)$")
# CPython before 3.11.8 and 3.12.2 builds Python AST objects with one recursion counter per
# interpreter, not per thread: two threads in `ast.parse` at once can fail with
# "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905). The
# grader grades submissions in threads, so every parse of its steps goes through `parse`.
PARSE_LOCK = threading.Lock()


@dataclasses.dataclass
class Grade:
    """The grading of one submission."""

    submission: str
    learner: str = ""
    lab: str = ""
    version: str = ""
    status: str = "graded"
    points: dict[int, int] = dataclasses.field(default_factory=dict)  # TODO -> its worth.
    passed: dict[int, bool] = dataclasses.field(default_factory=dict)
    messages: dict[int, str] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    flags: list[str] = dataclasses.field(default_factory=list)
    first_error: str = ""
    submitted: datetime.datetime | None = None  # The file's time, or the time in its name.
    late_days: int = 0
    penalty_percent: float = 0.0
    overridden: dict[int, tuple] = dataclasses.field(default_factory=dict)  # TODO -> (points, why)
    # Parameters the grader set otherwise than the lab: name -> (grader's value, lab's).
    parameters: dict[str, tuple] = dataclasses.field(default_factory=dict)
    diff: str = ""
    seconds: float = 0.0
    # TODO -> what its cell printed, as far as the grader keeps it (grade_kernel.OUTPUT_LIMIT).
    printed: dict[int, str] = dataclasses.field(default_factory=dict)

    @property
    def earned(self) -> dict[int, float]:
        """Points per TODO: the instructor's where overridden, else the check's."""
        return {
            todo: self.overridden[todo][0]
            if todo in self.overridden
            else self.points[todo] * self.passed.get(todo, False)
            for todo in self.points
        }

    @property
    def total(self) -> int:
        return sum(self.earned.values())

    @property
    def maximum(self) -> int:
        return sum(self.points.values())

    @property
    def final(self) -> float:
        """The total less the late penalty; 0 for a missing submission."""
        return round(self.total * (1 - self.penalty_percent / 100), 2)


# What a submission may write at least, in `/tmp` and in its work folder (workfolder.py).
TMP_FLOOR, WORK_FLOOR = 10**9, 2 * 10**9


@dataclasses.dataclass(frozen=True)
class DiskLimits:
    """Bytes a submission may write: in `/tmp` (and in `/dev/shm`), and in its work folders."""

    tmp_bytes: int = TMP_FLOOR
    work_bytes: int = WORK_FLOOR


@dataclasses.dataclass(kw_only=True)
class Limits:
    """What a lesson's submissions may take: seconds per lab cell id, for added cells and in
    all, and the bytes they may write."""

    cells: dict[str, float]
    added: float
    total: float
    why: str = ""
    disk: DiskLimits = DiskLimits()

    def of(self, cell_id: str) -> float:
        return self.cells.get(cell_id, self.added)


@dataclasses.dataclass(kw_only=True)
class Options:
    """How each submission runs: limits, memory, sandbox (a bwrap path or None), cache."""

    cell_timeout: float | None = None
    timeout: float | None = None
    memory_gb: float = 4.0
    bwrap: str | None = None
    cache: Path | None = None
    work_root: Path | None = None
    course: Path | None = None  # The grader's copy of utils/ and tools/ (sandbox.copy_course).


@dataclasses.dataclass(kw_only=True)
class Submission:
    """One submission as it goes through the steps; each step fills in its part."""

    path: Path
    labs: dict
    limits: dict
    options: Options
    id_pattern: str | None = None
    grade: Grade
    notebook: nbformat.NotebookNode | None = None
    lab: nbformat.NotebookNode | None = None
    restored: nbformat.NotebookNode | None = None
    prepared: list = dataclasses.field(default_factory=list)
    results: list = dataclasses.field(default_factory=list)
    judge_plan: list | None = None  # The judge's steps, for a sealed lab (`judge/judge_plan.py`).
    verdicts: dict | None = None  # TODO -> `judge_output.Verdict`, for a sealed lab.


def marks(cell: nbformat.NotebookNode) -> dict:
    """A cell's course marks: its metadata, else what its stable id (`todo-3`) says."""
    found = cell.get("metadata", {}).get(KEY, {})
    if "todo" in found or "check" in found:
        return found
    match = _STABLE_ID.match(str(cell.get("id", "")))
    return {match.group(1): int(match.group(2))} if match else {}


def todo_of(cell: nbformat.NotebookNode) -> int | None:
    """The TODO number of a learner's code cell: metadata, stable id, else `# TODO n:`."""
    if cell.cell_type != "code":
        return None
    found = marks(cell)
    if "check" in found:
        return None
    if "todo" in found:
        return found["todo"]
    match = next(filter(None, map(TODO_LINE.match, cell.source.splitlines())), None)
    return int(match.group(1)) if match else None


def without_magics(code: str) -> str:
    """`code` with its IPython magics and shell lines (`%time`, `!ls`) blanked out."""
    return "\n".join("" if re.match(r"^\s*[%!]", line) else line for line in code.splitlines())


def parse(code: str) -> ast.Module:
    """`ast.parse(code)`, one thread at a time (see `PARSE_LOCK`); raises `SyntaxError`."""
    with PARSE_LOCK:
        return ast.parse(code)
