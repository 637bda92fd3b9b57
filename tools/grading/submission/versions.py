"""Step `choose_lab`: the lab a submission is graded against, by its course version.

Takes the labs (`load_labs`: `labs/` and `--releases`) and the submission's metadata;
gives `Submission.lab`, `Grade.version`, a note where it fell back to the current lab, and
the points per TODO.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from tools.building import setup_cell
from tools.building.variants import DEFAULT_POINTS
from tools.grading.model import KEY, REPO_ROOT, Submission, marks


def load_labs(root: Path = REPO_ROOT, releases: Path | None = None) -> dict:
    """Returns {"current": labs/ by lesson, "version": the course's, version: {lesson: lab}}.

    The labs of other versions are those in `releases/<version>/`, by their metadata.
    """
    current = {p.stem: nbformat.read(p, as_version=4) for p in sorted(root.glob("labs/*.ipynb"))}
    labs: dict = {"current": current, "version": setup_cell.course_version(root)}
    if releases is not None and releases.is_dir():
        for path in sorted(releases.glob("*/*.ipynb")):
            notebook = nbformat.read(path, as_version=4)
            version = notebook.metadata.get(KEY, {}).get("version", path.parent.name)
            labs.setdefault(version, {})[path.stem] = notebook
    return labs


def choose_lab(notebook, lesson: str, labs: dict) -> tuple[nbformat.NotebookNode, str, str]:
    """Returns (the lab to grade against, its version, a note or "") for a submission."""
    current = labs["current"][lesson]
    current_version = current.metadata.get(KEY, {}).get("version") or labs["version"]
    version = notebook.metadata.get(KEY, {}).get("version")
    if version is None:
        return (
            current,
            current_version,
            (
                f"no course version in the notebook's metadata; graded against the current lab "
                f"(version {current_version})"
            ),
        )
    if version == current_version:
        return current, version, ""
    kept = labs.get(version, {}).get(lesson)
    if kept is not None:
        return kept, version, ""
    return (
        current,
        current_version,
        (
            f"made from version {version} of the lab, which this grader does not have "
            f"(--releases); graded against the current lab (version {current_version})"
        ),
    )


def step(submission: Submission) -> bool:
    """Chooses the lab and reads its points per TODO from the cells' metadata."""
    grade = submission.grade
    submission.lab, grade.version, note = choose_lab(
        submission.notebook, grade.lab, submission.labs
    )
    if note:
        grade.notes.append(note)
    grade.points = lab_points(submission.lab)
    return True


def lab_points(lab: nbformat.NotebookNode) -> dict[int, int]:
    """The points of each TODO of a lab, from its cells' metadata."""
    return {
        marks(c)["todo"]: c.metadata.get(KEY, {}).get("points", DEFAULT_POINTS)
        for c in lab.cells
        if "todo" in marks(c)
    }
