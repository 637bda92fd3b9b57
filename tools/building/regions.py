"""A lesson source's solution regions, and the stubs that replace them in the lab.

A region is the code between `### BEGIN SOLUTION` and `### END SOLUTION`, preceded in its
cell by `# TODO n:`. The lab gets a stub that still runs: `name = ...` for every name the
region assigns (`make_stub`). A step of the build (`tools/build_notebooks.py`).
"""

from __future__ import annotations

import ast
import re
import textwrap

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
TODO_LINE = re.compile(r"^\s*# TODO (\d+):")


class BuildError(Exception):
    """A lesson source is malformed; the message names the file and line."""


def find_regions(text: str, source_name: str) -> list[tuple[int, int]]:
    """Returns (begin, end) line numbers (1-based) of the solution regions of a source.

    Raises:
        BuildError: on a region that is nested, unclosed, or closed without a BEGIN.
    """
    regions, begin = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        marker = line.strip()
        if marker == BEGIN:
            if begin is not None:
                raise BuildError(
                    f"{source_name}:{number}: {BEGIN} inside the region opened at line {begin}."
                )
            begin = number
        elif marker == END:
            if begin is None:
                raise BuildError(f"{source_name}:{number}: {END} without {BEGIN}.")
            regions.append((begin, number))
            begin = None
    if begin is not None:
        raise BuildError(f"{source_name}:{begin}: {BEGIN} without {END}.")
    return regions


def make_stub(region_lines: list[str], todo: int, where: str) -> list[str]:
    """Returns lines that replace a solution region: `name = ...` per name it assigns.

    The region's indentation is kept, so a region inside a function stays inside it.

    Raises:
        BuildError: if the region is not valid Python.
    """
    indent = min(
        (len(line) - len(line.lstrip()) for line in region_lines if line.strip()), default=0
    )
    code = textwrap.dedent("\n".join(region_lines))
    try:
        statements = ast.parse(code).body
    except SyntaxError as error:
        raise BuildError(
            f"{where}: the solution of TODO {todo} is not valid Python: {error}"
        ) from None
    names: list[str] = []
    # Assignments at the region's top level and inside its blocks (`with`, `for`, `if`),
    # so that `with strategy.scope(): model = ...` gives the stub `model = ...`.
    assignments = [node for statement in statements for node in _walk_blocks(statement)]
    for statement in assignments:
        targets = []
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
            targets = [statement.target]
        for target in targets:
            for name in _bound_names(target):
                if name not in names:
                    names.append(name)
    stub = [f"{name} = ..." for name in names] or ["..."]
    return [" " * indent + line for line in stub]


def _bound_names(target: ast.expr) -> list[str]:
    """Returns the names an assignment target binds, in order.

    `a, (b, *c) = ...` binds a, b and c. `x[i] = ...` and `x.y = ...` bind no name: they
    change an object that exists already, so neither `x` nor `i` may be stubbed.
    """
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _bound_names(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _bound_names(element)]
    return []


def _walk_blocks(statement: ast.stmt):
    """Yields `statement` and the statements in its blocks, not those in nested functions."""
    yield statement
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return
    for field in ("body", "orelse", "finalbody"):
        for child in getattr(statement, field, []):
            yield from _walk_blocks(child)


def cell_regions(lines: list[str]) -> list[tuple[int, int]]:
    """Returns (begin, end) indexes (0-based) of the marker lines of a cell's regions."""
    regions, begin = [], None
    for index, line in enumerate(lines):
        if line.strip() == BEGIN:
            begin = index
        elif line.strip() == END:
            regions.append((begin, index))
    return regions


def todo_number(lines: list[str], begin: int, where: str) -> int:
    """Returns n of the `# TODO n:` line above the region that begins at `begin`."""
    for line in reversed(lines[:begin]):
        match = TODO_LINE.match(line)
        if match:
            return int(match.group(1))
    raise BuildError(f"{where}: a solution region with no `# TODO n:` comment before it.")
