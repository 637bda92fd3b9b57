"""Step `score`: each TODO's verdict, from the judge; its message, in the learner's words.

Takes `Submission.prepared`, `.results` (the learner's kernel) and `.verdicts` (the
judge's, `judge/judge.py`); gives `Grade.passed`, `.messages`, `.first_error` and a note where
a cell stopped the run. A TODO passes only if the judge says so; the kernel's results say
only what stopped the run and a TODO cell's own error, reported for that TODO.
"""

from __future__ import annotations

import re

import nbformat

from tools.grading.feedback import plain_line
from tools.grading.model import KEY, Grade, Submission, marks
from tools.grading.submission.flags import review_diff

_FAILED = ("error", "timeout", "died")
JUDGE_STOPPED = "judge stopped"


def describe(cell: nbformat.NotebookNode) -> str:
    """The cell in the learner's words: `the cell of TODO 2`, `a cell you added (...)`."""
    cell_marks = marks(cell) or cell.metadata.get(KEY, {})
    if "todo" in cell_marks:
        return f"the cell of TODO {cell_marks['todo']}"
    if "check" in cell_marks:
        return f"the check cell of TODO {cell_marks['check']}"
    if "added" in cell_marks:
        first = cell.source.strip().splitlines()[0][:60] if cell.source.strip() else "empty"
        return f"a cell you added ({first})"
    return f"the lab's cell {cell.get('id')}"


def with_name_hint(grade: Grade, todo: int, message: str) -> str:
    """A NameError after an earlier TODO failed: say which TODO to fix first."""
    failed = [n for n, ok in grade.passed.items() if n < todo and not ok]
    if message.startswith("NameError") and failed:
        message += (
            f" (a name the lab makes from TODO {failed[0]}'s result: fix TODO {failed[0]} first)"
        )
    return message


def score(grade: Grade, prepared: list, results: list, verdicts: dict) -> None:
    """Sets each TODO's verdict from the judge's `verdicts` (TODO 0: where the judge itself
    stopped); the kernel's `results` give the notes, the first error of a cell the learner
    added, and a TODO cell's own error, said for its TODO. Where the judge stopped before a
    TODO, the submission is flagged (`JUDGE_STOPPED`): what the judge last wrote on its
    error stream is never the grader's word (a learner's graph prints there)."""
    todo_errors: dict[int, str] = {}
    stop = ""
    for (cell, _), result in zip(prepared, results, strict=True):
        cell_marks = marks(cell) or cell.metadata.get(KEY, {})
        if result.status in ("timeout", "died") and not stop:
            # A lab cell's death is said as the learner's kernel's (`run.name_the_todo`).
            where = "" if result.error.startswith("your kernel") else f"{describe(cell)} "
            stop = f"{where}{result.error}; the cells after it were not run"
            grade.notes.append(f"Stopped: {stop}")
        if result.status in _FAILED and not grade.first_error and "added" in cell_marks:
            grade.first_error = f"{describe(cell)}: {result.error}"
        if "todo" in cell_marks and result.status in _FAILED:
            todo_errors[cell_marks["todo"]] = result.error
    judge = verdicts.get(0)
    for todo in grade.points:
        verdict = verdicts.get(todo)
        grade.passed[todo] = bool(verdict and verdict.passed)
        if verdict is not None and (verdict.passed or todo not in todo_errors):
            grade.messages[todo] = with_name_hint(grade, todo, verdict.message)
        elif todo in todo_errors:
            grade.messages[todo] = f"your TODO {todo} cell failed: {todo_errors[todo]}"
        else:
            grade.messages[todo] = (
                f"not run: {stop}"
                if stop
                else f"no verdict: the judge stopped before it judged TODO {todo}; your "
                "instructor will look at it"
                if judge
                else "no verdict"
            )
    if judge and not stop and any(todo not in verdicts for todo in grade.points):
        grade.flags.append(JUDGE_STOPPED)


def without_grader_paths(text: str, options) -> str:
    """`text` with the grader's own folders (the work folders, the data cache) named, not shown."""
    if options.cache is not None:
        text = text.replace(str(options.cache), "<data cache>")
    if options.work_root is not None:
        text = re.sub(re.escape(str(options.work_root)) + r"/[^/\s]+/cache", "<data cache>", text)
        text = re.sub(re.escape(str(options.work_root)) + r"/[^/\s]+", "<your work folder>", text)
    return text


def step(submission: Submission) -> bool:
    """Scores the submission from its results; each message is one plain line that names
    no folder of the grader's."""
    grade = submission.grade
    score(grade, submission.prepared, submission.results, submission.verdicts)

    def said(text: str) -> str:
        return plain_line(without_grader_paths(text, submission.options))

    grade.messages = {n: said(m) for n, m in grade.messages.items()}
    grade.first_error = said(grade.first_error)
    grade.notes = [said(note) for note in grade.notes]
    if JUDGE_STOPPED in grade.flags:
        last = said(submission.verdicts[0].message)
        grade.diff = (
            f"# The judge's last error line (a learner's graph may print there): {last}\n"
            + review_diff(submission.lab, submission.restored)
        )
    return True
