"""Step `restore`: the lab's protected cells, with the learner's TODO and added cells.

Takes the submission and its lab; gives `Submission.restored` (the notebook that runs)
and notes for the report (a TODO missing, or found twice). As nbgrader's `OverwriteCells`:
every protected cell is the lab's own, whatever the learner did to it.
"""

from __future__ import annotations

import copy

import nbformat

from tools.grading.model import KEY, Submission, marks, todo_of


def restore_protected_cells(submission: nbformat.NotebookNode, lab: nbformat.NotebookNode):
    """Returns the lab with the learner's cells in it, and notes for the report.

    Every protected cell is the lab's own; each TODO cell is the learner's (the last copy
    when there are several); every other learner cell is kept after the protected or TODO
    cell it followed (a protected cell is recognised by its source, its check mark, or its
    id). Learner cells carry the mark `{"added": True}`; no cell's source is changed here.
    """
    lab_sources = {cell.source: index for index, cell in enumerate(lab.cells)}
    lab_ids = {cell.id: index for index, cell in enumerate(lab.cells)}
    lab_todos = {marks(c)["todo"]: i for i, c in enumerate(lab.cells) if "todo" in marks(c)}
    lab_checks = {marks(c)["check"]: i for i, c in enumerate(lab.cells) if "check" in marks(c)}
    todo_cells: dict[int, list[nbformat.NotebookNode]] = {}
    added: dict[int, list[nbformat.NotebookNode]] = {}  # Lab position -> cells after it.
    anchor = -1
    for cell in submission.cells:
        todo = todo_of(cell)
        if todo in lab_todos:
            todo_cells.setdefault(todo, []).append(cell)
            anchor = lab_todos[todo]
            continue
        check = marks(cell).get("check")
        index = lab_checks.get(check, lab_sources.get(cell.source, lab_ids.get(cell.get("id"))))
        if index is not None and index not in lab_todos.values():
            anchor = index
        else:
            new = copy.deepcopy(cell)
            new.setdefault("metadata", {})[KEY] = {"added": True}
            added.setdefault(anchor, []).append(new)
    restored, notes = copy.deepcopy(lab), []
    restored.cells = list(added.get(-1, []))
    for index, cell in enumerate(lab.cells):
        cell = copy.deepcopy(cell)
        todo = marks(cell).get("todo")
        if todo is not None:
            copies = todo_cells.get(todo, [])
            if not copies:
                notes.append(f"TODO {todo}: no cell found in the submission")
            else:
                cell.source = copies[-1].source
            if len(copies) > 1:
                notes.append(f"TODO {todo}: {len(copies)} cells found; the last one was graded")
        restored.cells.append(cell)
        restored.cells += added.get(index, [])
    for number, cell in enumerate(restored.cells):
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        if "added" in cell.metadata.get(KEY, {}):
            cell.id = f"added-{number}"
    return restored, notes


def learner_cells(restored: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The code cells a learner wrote: the TODO cells and the added ones."""
    return [
        cell
        for cell in restored.cells
        if cell.cell_type == "code"
        and ({"todo", "added"} & set(marks(cell) or cell.metadata.get(KEY, {})))
    ]


def step(submission: Submission) -> bool:
    """Rebuilds the submission on its lab."""
    submission.restored, notes = restore_protected_cells(submission.notebook, submission.lab)
    submission.grade.notes += notes
    return True
