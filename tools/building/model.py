"""What the build's steps share: the `Lesson` being built (`variants.py`'s `STEPS` take it)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import nbformat


@dataclasses.dataclass
class Lesson:
    """One lesson being built: its source, and the lab and solution the steps make of it."""

    source_path: Path
    root: Path
    lab: nbformat.NotebookNode | None = None
    solution: nbformat.NotebookNode | None = None
    todos: list[int] = dataclasses.field(default_factory=list)

    @property
    def source_name(self) -> str:
        """The source's path from the root, as messages name it."""
        return self.source_path.relative_to(self.root).as_posix()

    @property
    def variants(self) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
        """(lab, solution)."""
        return self.lab, self.solution
