"""Step `prepare`: the code each cell runs, with the grader's own cells added.

Takes the restored notebook and the lab's parameters; gives `Submission.prepared`, a list
of (cell, code to run), up to the last check cell (`graded_part`: nothing after it is
graded). After the parameters cell: the parameters the grader injects.
Before the first learner cell: the snapshot (`kernel_guard.py`). Each check cell: the
parameters as literals, the guard (`kernel_guard.py` again), then the check.
"""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import nbformat

from tools.grading import judge_plan, sealed
from tools.grading.model import KEY, REPO_ROOT, Submission, marks, parse, without_magics
from tools.lesson_parameters import SMALL_PARAMETERS

GUARD_FILE = Path(__file__).with_name("kernel_guard.py")


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


def lab_names(lab: nbformat.NotebookNode) -> list[str]:
    """The names the lab's own code cells bind at top level (not the TODO cells')."""
    names = []
    for cell in lab.cells:
        if cell.cell_type != "code" or "todo" in marks(cell):
            continue
        if "added" in cell.metadata.get(KEY, {}):
            continue
        try:
            tree = parse(without_magics(cell.source))
        except SyntaxError:
            continue
        for node in tree.body:
            for target in getattr(node, "targets", [getattr(node, "target", None)]):
                for element in ast.walk(target) if target is not None else []:
                    if isinstance(element, ast.Name) and element.id not in names:
                        names.append(element.id)
    return names


def snapshot_code(names: list[str]) -> str:
    """The grader's first cell: the guard's file, then the snapshot of what it restores."""
    return (
        "# Grader: remember the functions of the modules imported so far, sys.path, IPython "
        f"hooks.\n{GUARD_FILE.read_text()}\n"
        f"_grader_state = _grader_snapshot(globals(), {names!r}, get_ipython())\n"
    )


def guard_code(root: Path = REPO_ROOT) -> str:
    """The start of every check cell: undo what a TODO cell may have patched."""
    return (
        "# Grader: undo what a TODO cell may have patched, then load the real checks.\n"
        f"{GUARD_FILE.read_text()}\n"
        f"_grader_restore(_grader_state, {str(root)!r}, {str(root / 'utils')!r})\n"
        "import utils.checks as checks\n"
    )


def graded_part(restored: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The notebook up to its last check cell: what comes after decides no verdict (lab 1's
    speed comparisons there took over half of its grading time)."""
    cells = restored.cells
    checks = [i for i, c in enumerate(cells) if "check" in (marks(c) or c.metadata.get(KEY, {}))]
    graded = copy.copy(restored)  # The cells themselves are the restored notebook's.
    graded.cells = cells[: checks[-1] + 1] if checks else cells
    return graded


def prepare_cells(
    restored: nbformat.NotebookNode, parameters: dict
) -> list[tuple[nbformat.NotebookNode, str]]:
    """Returns (cell, code to run) for every code cell, with the grader's cells added.

    After the parameters cell: the injected parameters. Before the first learner cell: the
    snapshot the guard restores from. Each check cell: the parameters as literals, the
    guard, then the check.
    """
    literals = "# Grader: the lab's parameters, as the grader set them.\n" + "\n".join(
        f"{name} = {value!r}" for name, value in parameters.items()
    )
    guard = guard_code()
    prepared, snapshot_done = [], False
    for cell in graded_part(restored).cells:
        if cell.cell_type != "code" or "hand_in" in cell.metadata.get("tags", []):
            continue  # The learner's hand-in cells: their checks again, a copy of the file.
        cell_marks = marks(cell) or cell.metadata.get(KEY, {})
        if ("todo" in cell_marks or "added" in cell_marks) and not snapshot_done:
            snapshot = snapshot_code(lab_names(restored))
            prepared.append((nbformat.v4.new_code_cell(id="grader-snapshot"), snapshot))
            snapshot_done = True
        if "check" in cell_marks:
            prepared.append((cell, literals + "\n" + guard + cell.source))
        else:
            prepared.append((cell, cell.source))
        if "parameters" in cell.metadata.get("tags", []):
            prepared.append((nbformat.v4.new_code_cell(id="injected-parameters"), literals))
    return prepared


def step(submission: Submission) -> bool:
    """Prepares the restored cells with the lesson's small parameters."""
    lesson = submission.grade.lab
    parameters = lab_parameters(submission.lab, SMALL_PARAMETERS.get(lesson, {}))
    own = lab_parameters(submission.lab, {})
    submission.grade.parameters = {
        name: (value, own.get(name)) for name, value in parameters.items() if own.get(name) != value
    }
    if lesson in sealed.SEALED_LABS:  # The judge decides: the kernel only makes the values.
        literals = "\n".join(f"{name} = {value!r}" for name, value in parameters.items())
        limit = submission.limits[lesson].total
        submission.prepared = sealed.kernel_cells(graded_part(submission.restored),
                                                  submission.lab, literals, limit)  # fmt: skip
        submission.judge_plan = judge_plan.plan(submission.lab, literals)
        return True
    submission.prepared = prepare_cells(submission.restored, parameters)
    return True
