"""The build's step that heads a lab and its solution: banner, open-in links, graded note."""

from __future__ import annotations

from pathlib import Path

import nbformat

from tools.building import setup_cell
from tools.building.model import Lesson
from tools.building.outputs import METADATA_KEY
from tools.building.regions import BuildError

BUILD_COMMAND = "make build"
# What an instructor's grading (tools/grade.py) scores, said in every lab's header.
GRADED_NOTE = (
    "**What is graded:** each TODO's check, run again on a small dataset with your TODO "
    "cells and the cells you add; every other cell comes from the course."
)
# The same place in every solution: what it is, and where the lab is.
SOLUTION_NOTE = (
    "**This is the solution:** the lab `labs/{stem}.ipynb` with every TODO done, executed "
    "with the full parameters."
)


def add_header(lesson: Lesson) -> None:
    """The generated-from banner, the open-in links, and the graded or solution note."""
    points = {
        c.metadata[METADATA_KEY]["todo"]: c.metadata[METADATA_KEY]["points"]
        for c in lesson.lab.cells
        if "todo" in c.metadata.get(METADATA_KEY, {})
    }
    stem, root = lesson.source_path.stem, lesson.root
    try:
        repository = setup_cell.repository(root)
    except ValueError as error:
        raise BuildError(str(error)) from None
    for notebook in lesson.variants:
        folder = "labs" if notebook.metadata[METADATA_KEY]["variant"] == "lab" else "solutions"
        title = notebook.cells[0]
        banner = (
            f"<!-- Generated from {lesson.source_name} by tools/build_notebooks.py. "
            f"Edit the source, then run: {BUILD_COMMAND} -->"
        )
        title.source = banner + "\n" + title.source
        parts = [open_in_links(repository, root, folder, stem)] if repository else []
        if folder == "labs":
            parts.append(graded_note(points))
        else:
            parts.append(SOLUTION_NOTE.format(stem=stem))
        links = nbformat.v4.new_markdown_cell(source="\n\n".join(parts))
        links.id = "cell-links"
        notebook.cells.insert(1, links)


def open_in_links(repository: str, root: Path, folder: str, stem: str) -> str:
    """Links that open a published notebook at its version's tag, in Colab and in Workbench."""
    tag = f"v{setup_cell.course_version(root)}"
    colab = (
        f"https://colab.research.google.com/github/{repository}/blob/{tag}/{folder}/{stem}.ipynb"
    )
    raw = f"https://raw.githubusercontent.com/{repository}/{tag}/{folder}/{stem}.ipynb"
    workbench = (
        f"https://console.cloud.google.com/vertex-ai/workbench/deploy-notebook?download_url={raw}"
    )
    return f"[Open in Colab]({colab}) · [Open in Vertex AI Workbench]({workbench})"


def graded_note(points: dict[int, int]) -> str:
    """Returns the lab header's "What is graded" paragraph, with each TODO's points."""
    each = ", ".join(f"TODO {todo}: {n} point{'s' * (n != 1)}" for todo, n in points.items())
    return f"{GRADED_NOTE} Points: {each} ({sum(points.values())} in all)."
