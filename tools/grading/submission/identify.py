"""Steps `read` and `identify`: a submission's notebook, its learner id and its lab.

Takes the submission's path (and `--id-pattern`); gives `Submission.notebook`,
`Grade.learner` (from the file's name only) and `Grade.lab`, or a status that ends its
grading (unreadable, unknown lab).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from tools.grading.model import KEY, Submission

# The name the hand-in cell gives its copy: `<id>_<lab>.ipynb` (an id has no `_`).
HAND_IN_NAME = re.compile(r"^(?P<id>[^_]+)_\d\d_\w+\.ipynb$")
_TITLE = re.compile(r"^#\s*(?:Lab|Lesson)\s+(\d+)\b", re.MULTILINE)


def learner_id(path: Path, pattern: str | None) -> str:
    """The learner's id, from the file's name: `--id-pattern`'s group `id` (or 1) where it
    matches, else the id of a hand-in copy's name (`HAND_IN_NAME`), else the name without
    `.ipynb`. Never from inside the file: its metadata names whoever its author typed."""
    match = re.search(pattern, path.name) if pattern else None
    if match:
        return match.groupdict().get("id") or (match.group(1) if match.groups() else match.group(0))
    match = HAND_IN_NAME.match(path.name)
    return match.group("id") if match else path.stem


def named_learner(notebook: nbformat.NotebookNode) -> str:
    """The learner the notebook's metadata names (`tpu_speed_pipelines.learner`), or ""."""
    found = notebook.metadata.get(KEY, {}).get("learner")
    return found.strip() if isinstance(found, str) else ""


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


def read(submission: Submission) -> bool:
    """Reads the notebook; a file that is not one is a bad submission, not a crash."""
    grade = submission.grade
    try:
        submission.notebook = nbformat.read(submission.path, as_version=4)
    except Exception as error:
        grade.status = f"unreadable: {type(error).__name__}: {str(error).splitlines()[0][:120]}"
        return False
    grade.learner = learner_id(submission.path, submission.id_pattern)
    return True


def identify(submission: Submission) -> bool:
    """Finds the submission's lesson among the current labs."""
    lesson = identify_lab(submission.notebook, submission.labs["current"])
    if lesson is None:
        submission.grade.status = (
            "unknown lab: no course metadata and no 'Lab N' or 'Lesson N' title"
        )
        return False
    submission.grade.lab = lesson
    return True
