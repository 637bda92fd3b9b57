"""The lab's solution of each TODO, for the judge (`judge_plan.py`, `judge.py`).

Where a TODO's check fails, the judge runs the lines its check cell adds (lab 4's
`global_batch_size, learning_rate = scale_for_replicas(...)`) on the solution's TODO cell,
and the kernel takes those values too: the later TODOs are graded on what the lab would
have given them, and one mistake costs one TODO. The solution is the lesson source's, as
built now; a lab of another version (other TODO stubs) gets none.
"""

from __future__ import annotations

import functools
from pathlib import Path

import nbformat

from tools.building.variants import split_variants
from tools.grading import model
from tools.grading.model import KEY, REPO_ROOT, marks


@functools.lru_cache(maxsize=16)
def _solution_cells(path: Path, modified: float) -> tuple[dict, dict]:
    """({todo: the lab's stub}, {todo: the solution's cell}) of a lesson source as built now."""
    with model.PARSE_LOCK:  # The build parses with ast, as the grader's threads do.
        lab, solution = split_variants(path)
    return _todo_cells(lab), _todo_cells(solution)


def _todo_cells(notebook: nbformat.NotebookNode) -> dict[int, str]:
    return {
        marks(c)["todo"]: c.source
        for c in notebook.cells
        if c.cell_type == "code" and "todo" in marks(c)
    }


def reference_cells(lab: nbformat.NotebookNode) -> dict[int, str]:
    """{todo: the solution's TODO cell} of the lab's lesson source, where the lab is what
    that source builds now (the same TODO stubs); {} for a lab of another version."""
    source = lab.metadata.get(KEY, {}).get("source")
    path = REPO_ROOT / str(source)
    if not source or not path.is_file():
        return {}
    stubs, solution = _solution_cells(path, path.stat().st_mtime)
    ours = {
        marks(c)["todo"]: c.source
        for c in lab.cells
        if c.cell_type == "code" and "todo" in marks(c)
    }
    return solution if ours == stubs else {}
