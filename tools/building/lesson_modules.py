"""The course modules a lesson reaches: what its lab's set-up cell embeds.

Starts from the lesson source's imports, the set-up cell's own (`utils.lab.runtime`) and the
lesson's check module (named after the lesson: `utils/checks/tf_data_basics.py` for
`01_tf_data_basics`), then follows every `utils` import found in those files, at any depth
(a function's own imports too), until nothing new is found. Static imports only: the course
imports no `utils` module by a computed name (`utils.checks` names its lessons' modules in
`LESSON_OF_CHECK`, and imports only the one a lab uses).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]

# What every lab imports before its own code: the package, the set-up's runtime, the checks.
ALWAYS = (
    "utils/__init__.py",
    "utils/lab/runtime.py",
    "utils/checks/__init__.py",
    "utils/checks/_base.py",
)


def check_module(stem: str) -> str:
    """The check module of lesson `stem` ("01_tf_data_basics" -> utils/checks/tf_data_basics.py)."""
    return f"utils/checks/{stem.split('_', 1)[1]}.py"


def _module_file(dotted: str, root: Path) -> str | None:
    """The file of module `dotted` ("utils.checks._base"), or None if it is not one."""
    path = Path(*dotted.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if (root / candidate).is_file():
            return candidate.as_posix()
    return None


def imported_files(path: Path, root: Path = REPO_ROOT) -> set[str]:
    """The course files (`utils...` only) the code in `path` imports, relative to `root`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            dotted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            dotted = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in dotted:
            parts = name.split(".")
            if parts[0] == "utils":  # A package's import also runs its parents' __init__.
                found |= {_module_file(".".join(parts[:n]), root) for n in range(1, len(parts) + 1)}
    return found - {None}


def lesson_files(stem: str, root: Path = REPO_ROOT) -> list[str]:
    """The course files lesson `stem` reaches, sorted: what its set-up cell embeds."""
    start = {*ALWAYS, check_module(stem)}
    todo = {name for name in start if (root / name).is_file()}
    todo |= imported_files(root / "notebooks" / f"{stem}.py", root)
    reached: set[str] = set()
    while todo:
        name = todo.pop()
        reached.add(name)
        todo |= imported_files(root / name, root) - reached
    return sorted(reached)
