"""Step `prepare`: the code the learner's kernel runs, and the judge's plan.

Takes the restored notebook and the lab's parameters (the lesson's small ones injected);
gives `Submission.prepared`, a list of (cell, code to run) up to the last check cell
(`graded_part`: nothing after it is graded), and `Submission.judge_plan`. The kernel runs
the learner's cells without their checks and keeps what each TODO made (`sealed.py`); the
judge, a process that runs no learner code, runs the lab's checks on those values. No
verdict comes from the learner's kernel (docs/grading.md says why).
"""

from __future__ import annotations

import ast
import copy

import nbformat

from tools.building.lesson_parameters import SMALL_PARAMETERS
from tools.grading import judge_plan, sealed
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


def judged_cells(restored, lab, parameters: dict, seconds: float) -> tuple[list, list]:
    """(cell, code) the kernel runs, and the judge's plan, with `parameters` injected."""
    literals = "\n".join(f"{name} = {value!r}" for name, value in parameters.items())
    prepared = sealed.kernel_cells(graded_part(restored), lab, literals, seconds)
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
