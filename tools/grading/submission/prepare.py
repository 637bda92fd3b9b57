"""Step `prepare`: the code the learner's kernel runs, and the judge's plan.

Takes the restored notebook and the lab's parameters (the lesson's small ones injected);
gives `Submission.prepared`, a list of (cell, code to run) up to the last check cell
(`graded_part`: nothing after it is graded), and `Submission.judge_plan`. The kernel runs
the learner's cells without their checks and keeps what each TODO made (`kernel_cells`,
with the grader's cells of `kernel/cells.py`); the judge, a process that runs no learner
code, runs the lab's checks on those values. No verdict comes from the learner's kernel
(docs/grading.md says why).
"""

from __future__ import annotations

import ast
import copy
import textwrap
from pathlib import Path

import nbformat

from tools.building.lesson_parameters import SMALL_PARAMETERS
from tools.grading.judge import judge_plan
from tools.grading.judge.judge_plan import bound_names, split_check_cell
from tools.grading.kernel import cells
from tools.grading.model import KEY, Submission, marks, parse

# What the grader sets otherwise than the tests' small parameters, so that an answer the
# learner's own run fails cannot pass at the grader's size (one verdict, wherever given):
# lab 1 at an image count that no fixed `shuffle(n)` a learner types is likely to equal
# (shuffle(100) would be a full shuffle of 100 images), with the lab's own reads in flight
# (a map of 8 would pass a bar of 8 that the lab's 16 fails).
GRADER_OVERRIDES = {"01_tf_data_basics": {"NUM_IMAGES": 103, "NUM_PARALLEL_READS": 16}}


def grader_parameters(lesson: str) -> dict:
    """The parameters the grader runs `lesson` with: the small ones, and its overrides."""
    return {**SMALL_PARAMETERS.get(lesson, {}), **GRADER_OVERRIDES.get(lesson, {})}


def lab_parameters(lab: nbformat.NotebookNode, injected: dict) -> dict:
    """Returns the lab's parameters (literal values of its parameters cell), `injected` last."""
    cell = next(c for c in lab.cells if "parameters" in c.metadata.get("tags", []))
    values = {}
    for statement in parse(cell.source).body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name):
                try:
                    values[target.id] = ast.literal_eval(statement.value)
                except ValueError:
                    pass
    return {**values, **injected}


def graded_part(restored: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook up to its last check cell: what comes after decides no verdict (lab 1's
    speed comparisons there took over half of its grading time)."""
    cells = restored.cells
    checks = [i for i, c in enumerate(cells) if "check" in (marks(c) or c.metadata.get(KEY, {}))]
    graded = copy.copy(restored)  # The cells themselves are the restored notebook's.
    graded.cells = cells[: checks[-1] + 1] if checks else cells
    return graded


def kernel_source(cell, cell_marks: dict) -> str:
    """What the learner's kernel runs of a cell ("" for nothing): a check cell without its
    check calls (the judge makes them), so that what the lab binds there after its check
    is there for the cells below, then the solution's values the judge sent where the
    check failed; nothing of a text cell or a hand-in cell (its checks again)."""
    if cell.cell_type != "code" or "hand_in" in cell.metadata.get("tags", []):
        return ""
    if "check" not in cell_marks:
        return cell.source
    others = split_check_cell(cell.source)[1]
    if not others:
        return ""
    return (
        f"try:\n{textwrap.indent(others, '    ')}\nfinally:  # Grader: the judge's values.\n"
        f"    {cells.references_code(cell_marks['check'])}"
    )


def kernel_cells(restored, lab, literals: str, seconds: float) -> list:
    """(cell, code) the kernel runs: the learner's notebook without its checks (the judge
    runs those; a check cell's other lines run), the grader's kernel side started before
    the first TODO cell, each TODO's values kept after its cell, and the end said after
    the last."""
    names = {
        marks(c)["todo"]: bound_names(c.source)
        for c in lab.cells
        if c.cell_type == "code" and "todo" in marks(c)
    }
    prepared, started = [], False
    for cell in restored.cells:
        cell_marks = marks(cell) or cell.metadata.get(KEY, {})
        source = kernel_source(cell, cell_marks)  # Hand-in cells: their checks again.
        if not source:
            continue
        if "todo" in cell_marks and not started:
            start = cells.start_code(Path(cells.SOCKET_NAME), seconds)
            prepared.append((nbformat.v4.new_code_cell(id="grader-start"), start))
            started = True
        prepared.append((cell, source))
        if "parameters" in cell.metadata.get("tags", []):
            prepared.append((nbformat.v4.new_code_cell(id="injected-parameters"), literals))
        if "todo" in cell_marks:
            todo = cell_marks["todo"]
            keep = cells.keep_code(todo, names.get(todo, []))
            # It waits there for the judge's run of the TODO's check cell: said as that cell.
            kept = nbformat.v4.new_code_cell(id=f"grader-keep-{todo}")
            kept.metadata[KEY] = {"check": todo}
            prepared.append((kept, keep))
    prepared.append((nbformat.v4.new_code_cell(id="grader-finish"), cells.FINISH_CODE))
    return prepared


def judged_cells(restored, lab, parameters: dict, seconds: float) -> tuple[list, list]:
    """(cell, code) the kernel runs, and the judge's plan, with `parameters` injected."""
    literals = "\n".join(f"{name} = {value!r}" for name, value in parameters.items())
    prepared = kernel_cells(graded_part(restored), lab, literals, seconds)
    return prepared, judge_plan.plan(lab, literals)


def step(submission: Submission) -> bool:
    """Prepares the restored cells with the lesson's small parameters."""
    lesson = submission.grade.lab
    parameters = lab_parameters(submission.lab, grader_parameters(lesson))
    own = lab_parameters(submission.lab, {})
    submission.grade.parameters = {
        name: (value, own.get(name)) for name, value in parameters.items() if own.get(name) != value
    }
    limit = submission.limits[lesson].total
    submission.prepared, submission.judge_plan = judged_cells(
        submission.restored, submission.lab, parameters, limit
    )
    return True
