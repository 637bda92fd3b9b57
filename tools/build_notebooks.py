"""Builds labs/ and solutions/ from the lesson sources in notebooks/.

Steps, for each `notebooks/NN_*.py` (jupytext percent format):
1. Read the source and check its solution regions (`### BEGIN SOLUTION` ... `### END
   SOLUTION`): each one closed, none nested, each preceded in its cell by `# TODO n:`,
   TODOs numbered 1..N in order, matching the numbered learning objectives "(TODO n)" of the
   first cell, and each TODO cell followed by a check cell that passes `todo=n`; no cell
   empty.
   Put the set-up code (tools/building/setup_cell.py) into the one code cell tagged `setup`; turn
   each `# NBVAL_CHECK_OUTPUT` line into the cell's tag `nbval-check-output` (out of the
   learner's view) and tag every other code cell `nbval-ignore-output`, so that strict
   nbval compares only the outputs the lesson marks as deterministic.
   Add the hand-in cells, tagged `hand_in` (the grader skips them): tools/grading/hand_in_code.py
   in a hidden cell after the set-up cell; at the end, a "Hand in" text and a cell that
   sets `LEARNER_ID` and calls `hand_in({n: lambda: <TODO n's check call>, ...})`, each
   call taken from its check cell, where it must be a statement of its own.
2. Lab: replace each region with a stub that still runs (`name = ...` for every name the
   region assigns), strip outputs, and write `labs/NN_*.ipynb`.
3. Solution: drop the marker lines, execute it with papermill on the embedded dataset
   (default parameters), keep the outputs, and write `solutions/NN_*.ipynb`.
Before them, the lessons' cells tagged `save` are written into the `utils` modules that
hand their functions out (`tools/building/saved.py`): one copy of each solved function that is
also a helper. The set-up cells embed `utils`, so this comes first (`--embed-only` too).

Steps 1-2 and the solution's preparation are `tools/building/variants.py`'s (named in `STEPS`,
one function each, run in order by `split_variants`); the regions and stubs are
`tools/building/regions.py`'s job, executing a solution and keeping only its outputs
`tools/building/outputs.py`'s. This module runs them, and `--check` and `--embed-only`.

`--check` builds in memory, writes nothing, and fails naming each generated file that
differs from what its source gives (outputs aside), each `utils` module whose saved
functions differ from the lessons', each stale file, and each solution never executed.

Usage:
    python -m tools.build_notebooks            # rebuild everything (executes solutions)
    python -m tools.build_notebooks --check    # compare only
    python -m tools.build_notebooks --only 01 --no-execute
    python -m tools.build_notebooks --embed-only   # after a utils/ change: set-up cells only
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import nbformat

from tools.building import saved as build_saved
from tools.building import setup_cell
from tools.building.header import BUILD_COMMAND
from tools.building.outputs import execute_solution, strip_outputs
from tools.building.regions import BuildError
from tools.building.variants import split_variants, to_text

REPO_ROOT = Path(__file__).resolve().parents[1]


def lesson_sources(root: Path, only: str | None = None) -> list[Path]:
    """Returns the lesson sources `notebooks/NN_*.py`, optionally those starting `only`."""
    paths = sorted((root / "notebooks").glob("[0-9][0-9]_*.py"))
    return [p for p in paths if only is None or p.name.startswith(only)]


def check(root: Path) -> list[str]:
    """Returns one message per generated file that is out of date, stale or unexecuted.

    A notebook whose embedded course differs from `utils/` gets its own message. The
    embedded text itself is compared by what it decodes to, as compressors may differ
    between machines.
    """
    sources = lesson_sources(root)
    problems = build_saved.problems(root, sources)
    expected = {f"{folder}/{p.stem}.ipynb" for p in sources for folder in ("labs", "solutions")}
    for folder in ("labs", "solutions"):
        for path in sorted((root / folder).glob("*.ipynb")):
            if f"{folder}/{path.name}" not in expected:
                problems.append(
                    f"{folder}/{path.name} has no source in notebooks/. Delete it, or add "
                    f"notebooks/{path.stem}.py."
                )
    for source in sources:
        course = setup_cell.course_files(source.stem, root)
        lab, solution = split_variants(source, root)
        for folder, built in (("labs", lab), ("solutions", solution)):
            path = root / folder / f"{source.stem}.ipynb"
            stale = (
                f"{folder}/{path.name} is out of date with notebooks/{source.name}. "
                f"Run: {BUILD_COMMAND}"
            )
            if not path.exists():
                problems.append(f"{folder}/{path.name} is missing. Run: {BUILD_COMMAND}")
                continue
            on_disk = nbformat.read(path, as_version=4)
            embedded = _embedded_course_problem(on_disk, course)
            if embedded:
                problems.append(f"{folder}/{path.name} {embedded} Run: {BUILD_COMMAND}")
                continue
            built = _with_payload_of(on_disk, built)
            if to_text(strip_outputs(on_disk)) != to_text(strip_outputs(built)):
                problems.append(stale)
            elif folder == "labs" and path.read_text() != to_text(built):
                problems.append(stale)
            elif folder == "solutions" and not any(
                cell.get("outputs") for cell in on_disk.cells if cell.cell_type == "code"
            ):
                problems.append(f"{folder}/{path.name} has no outputs. Run: {BUILD_COMMAND}")
    return problems


def _embedded_course_problem(notebook: nbformat.NotebookNode, course: dict) -> str | None:
    """Says how a notebook's embedded course differs from `course`; None if it does not."""
    cells = _setup_cells(notebook)
    if not cells:
        return None
    if not setup_cell.PAYLOAD_PATTERN.search(cells[0].source):
        return None  # Built before notebooks carried the course: out of date, said below.
    try:
        embedded = setup_cell.embedded_files(cells[0].source)
    except ValueError as error:
        return f"is damaged: {error}"
    if embedded == course:
        return None
    differ = sorted(
        name for name in embedded.keys() | course.keys() if embedded.get(name) != course.get(name)
    )
    return (
        f"embeds a course package that differs from the checkout's in {len(differ)} "
        f"file(s): {', '.join(differ[:3])}{' ...' if len(differ) > 3 else ''}."
    )


def _with_payload_of(
    on_disk: nbformat.NotebookNode, built: nbformat.NotebookNode
) -> nbformat.NotebookNode:
    """Returns `built` with the embedded course's encoded text of `on_disk`.

    Call it once both embed the same files: compressors may encode them differently on
    different machines, and that is no change.
    """

    result = copy.deepcopy(built)
    for disk_cell, cell in zip(_setup_cells(on_disk), _setup_cells(result), strict=False):
        found = setup_cell.PAYLOAD_PATTERN.search(disk_cell.source)
        built_found = setup_cell.PAYLOAD_PATTERN.search(cell.source)
        if found and built_found:
            start, end = built_found.span()
            cell.source = cell.source[:start] + found.group(0) + cell.source[end:]
    return result


def build(root: Path, *, only: str | None = None, execute: bool = True) -> list[Path]:
    """Writes the saved functions, labs/ and solutions/ from notebooks/; returns what it wrote."""
    written = build_saved.write(root, lesson_sources(root))
    for source in lesson_sources(root, only):
        lab, solution = split_variants(source, root)
        if execute:
            print(f"Executing solutions/{source.stem}.ipynb ...", flush=True)
            (root / "solutions").mkdir(exist_ok=True)
            solution = execute_solution(solution, cwd=root / "solutions")
        for folder, notebook in (("labs", lab), ("solutions", solution)):
            path = root / folder / f"{source.stem}.ipynb"
            path.parent.mkdir(exist_ok=True)
            path.write_text(to_text(notebook))
            written.append(path)
            print(f"Wrote {path.relative_to(root)}")
    return written


def embed_only(root: Path, *, only: str | None = None) -> list[Path]:
    """Writes the saved functions, re-embeds the course in set-up cells; returns what it wrote.

    Every change to `utils/` leaves every lab and solution embedding a stale course, and a
    full build executes every solution again. This rewrites only the source of each
    committed notebook's set-up cell, as the build would write it; every other cell,
    outputs included, stays as it is. `--check` still fails where anything else differs
    from the source.

    Raises:
        BuildError: if a notebook is missing, or its set-up cells are not the built ones.
    """
    written = build_saved.write(root, lesson_sources(root))
    for source in lesson_sources(root, only):
        for folder, built in zip(("labs", "solutions"), split_variants(source, root), strict=True):
            path = root / folder / f"{source.stem}.ipynb"
            if not path.exists():
                raise BuildError(f"{folder}/{path.name} is missing. Run: {BUILD_COMMAND}")
            on_disk = nbformat.read(path, as_version=4)
            disk_cells, built_cells = _setup_cells(on_disk), _setup_cells(built)
            if [c.id for c in disk_cells] != [c.id for c in built_cells]:
                raise BuildError(
                    f"{folder}/{path.name}: its set-up cells are not the source's. "
                    f"Run: {BUILD_COMMAND}"
                )
            for disk_cell, built_cell in zip(disk_cells, built_cells, strict=True):
                disk_cell.source = built_cell.source
            text = to_text(on_disk)
            if path.read_text() != text:
                path.write_text(text)
                written.append(path)
                print(f"Re-embedded the course in {path.relative_to(root)}")
    return written


def _setup_cells(notebook: nbformat.NotebookNode) -> list:
    return [c for c in notebook.cells if setup_cell.SETUP_TAG in c.metadata.get("tags", [])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; write nothing")
    parser.add_argument("--only", help="build only the lessons whose file name starts so")
    parser.add_argument("--no-execute", action="store_true", help="write solutions unexecuted")
    parser.add_argument(
        "--embed-only",
        action="store_true",
        help="only re-embed the course in the committed notebooks' set-up cells (outputs kept)",
    )
    args = parser.parse_args(argv)
    try:
        if args.check:
            problems = check(REPO_ROOT)
            for problem in problems:
                print(problem, file=sys.stderr)
            if not problems:
                count = len(lesson_sources(REPO_ROOT))
                print(f"labs/ and solutions/ match notebooks/ ({count} lessons).")
            return 1 if problems else 0
        if args.embed_only:
            written = embed_only(REPO_ROOT, only=args.only)
            count = sum(path.suffix == ".ipynb" for path in written)
            print(f"Re-embedded the course in {count} notebook(s).")
            return 0
        build(REPO_ROOT, only=args.only, execute=not args.no_execute)
    except BuildError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
