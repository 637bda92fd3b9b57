"""Builds labs/ and solutions/ from the lesson sources in notebooks/.

Steps, for each `notebooks/NN_*.py` (jupytext percent format):
1. Read the source and check its solution regions (`### BEGIN SOLUTION` ... `### END
   SOLUTION`): each one closed, none nested, each preceded in its cell by `# TODO n:`,
   TODOs numbered 1..N in order, matching the numbered learning objectives "(TODO n)" of the
   first cell, and each TODO cell followed by a check cell that passes `todo=n`; no cell
   empty.
   Put the set-up code (tools/setup_cell.py) into the one code cell tagged `setup`, and tag
   every code cell without `# NBVAL_CHECK_OUTPUT` `nbval-ignore-output`, so that strict
   nbval compares only the outputs the lesson marks as deterministic.
2. Lab: replace each region with a stub that still runs (`name = ...` for every name the
   region assigns), strip outputs, and write `labs/NN_*.ipynb`.
3. Solution: drop the marker lines, execute it with papermill on the embedded dataset
   (default parameters), keep the outputs, and write `solutions/NN_*.ipynb`.

The steps are named in `STEPS` (one function each, run in order by `split_variants`);
the regions and stubs are `tools/build_regions.py`'s job, executing a solution and
keeping only its outputs `tools/build_outputs.py`'s.

`--check` builds in memory, writes nothing, and fails naming each generated file that
differs from what its source gives (outputs aside), each stale file, and each solution
that was never executed.

Usage:
    python -m tools.build_notebooks            # rebuild everything (executes solutions)
    python -m tools.build_notebooks --check    # compare only
    python -m tools.build_notebooks --only 01 --no-execute
    python -m tools.build_notebooks --embed-only   # after a utils/ change: set-up cells only
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import re
import sys
from pathlib import Path

import jupytext
import nbformat

from tools import setup_cell
from tools.build_outputs import (  # noqa: F401  (re-exported: the build's names)
    EXECUTION_SECONDS,
    METADATA_KEY,
    execute_solution,
    strip_outputs,
    without_machine_paths,
)
from tools.build_regions import (  # noqa: F401  (re-exported: the build's names)
    BEGIN,
    END,
    TODO_LINE,
    BuildError,
    cell_regions,
    find_regions,
    make_stub,
    todo_number,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
OBJECTIVE_LINE = re.compile(r"^#?\s*(\d+)\.\s.*\(TODO (\d+)\)", re.MULTILINE)
CHECK_CALL = re.compile(r"checks\.check_\w+\((?:.|\n)*\btodo=(\d+)")
BUILD_COMMAND = "make build"
# A TODO cell's points: `# %% points=2` on its cell in the source; 1 when unset.
DEFAULT_POINTS = 1
# What an instructor's grading (tools/grade.py) scores, said in every lab's header.
GRADED_NOTE = (
    "**What is graded:** the check cell after each TODO, run again on a small dataset. "
    "Your TODO cells and the cells you add are kept where you put them; every other cell "
    "(set-up, parameters, text, checks) is restored from the course first, so put your "
    "work in the TODO cells or in new cells."
)

# The same place in every solution: what it is, and where the lab is.
SOLUTION_NOTE = (
    "**This is the solution:** the lab `labs/{stem}.ipynb` with every TODO done, executed "
    "with the full parameters."
)


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


def split_into_lab_and_solution(lesson: Lesson) -> None:
    """Reads the source; the lab gets each region's stub, the solution its code."""
    text = lesson.source_path.read_text()
    source_name = lesson.source_name
    find_regions(text, source_name)
    notebook = jupytext.reads(text, fmt="py:percent")
    _reject_empty_cells(notebook, text, source_name)
    lab, solution = _empty_notebook(source_name, "lab"), _empty_notebook(source_name, "solution")
    todos = lesson.todos
    for index, cell in enumerate(notebook.cells):
        where = f"{source_name} (cell {index + 1})"
        lines = cell.source.splitlines()
        regions = cell_regions(lines) if cell.cell_type == "code" else []
        lab_lines, solution_lines, last = [], [], 0
        numbers = set()
        for begin, end in regions:
            todo = todo_number(lines, begin, where)
            numbers.add(todo)
            lab_lines += lines[last:begin] + make_stub(lines[begin + 1 : end], todo, where)
            solution_lines += lines[last:begin] + lines[begin + 1 : end]
            last = end + 1
        lab_lines += lines[last:]
        solution_lines += lines[last:]
        if len(numbers) > 1:
            raise BuildError(f"{where}: one cell holds TODOs {sorted(numbers)}; split it.")
        metadata = {"tags": cell.metadata["tags"]} if cell.metadata.get("tags") else {}
        cell_id = f"cell-{index + 1:02d}"
        if numbers:
            todos.append(numbers.pop())
            points = cell.metadata.get("points", DEFAULT_POINTS)
            if not isinstance(points, int) or isinstance(points, bool) or points < 0:
                raise BuildError(f"{where}: points must be a whole number >= 0; found {points!r}.")
            metadata[METADATA_KEY] = {"todo": todos[-1], "points": points}
            cell_id = f"todo-{todos[-1]}"
        check = CHECK_CALL.search(cell.source) if cell.cell_type == "code" else None
        if check:
            metadata[METADATA_KEY] = {"check": int(check.group(1))}
            cell_id = f"check-{check.group(1)}"
        for variant, variant_lines in ((lab, lab_lines), (solution, solution_lines)):
            new_cell = _new_cell(cell.cell_type, "\n".join(variant_lines), metadata, cell_id)
            variant.cells.append(new_cell)
    lesson.lab, lesson.solution = lab, solution


def validate(lesson: Lesson) -> None:
    """TODOs 1..N in order, named by the objectives, each followed by its check cell."""
    _validate_lesson(lesson.lab, lesson.todos, lesson.source_name)


def stamp_version(lesson: Lesson) -> None:
    """Both variants carry the course version they were built from."""
    root = lesson.root
    version_root = root if (root / "pyproject.toml").exists() else REPO_ROOT
    for variant in lesson.variants:
        variant.metadata[METADATA_KEY]["version"] = setup_cell.course_version(version_root)


def put_setup_code(lesson: Lesson) -> None:
    """The cell tagged `setup` gets the set-up code, the course package embedded."""
    for variant in lesson.variants:
        _put_setup_code(variant, lesson.source_path.stem, lesson.source_name, lesson.root)


def tag_unchecked_outputs(lesson: Lesson) -> None:
    """Cells without `# NBVAL_CHECK_OUTPUT` are tagged for strict nbval to skip."""
    for variant in lesson.variants:
        _tag_unchecked_outputs(variant)


def add_header(lesson: Lesson) -> None:
    """The generated-from banner, the open-in links, and the graded or solution note."""
    points = {
        c.metadata[METADATA_KEY]["todo"]: c.metadata[METADATA_KEY]["points"]
        for c in lesson.lab.cells
        if "todo" in c.metadata.get(METADATA_KEY, {})
    }
    for variant in lesson.variants:
        _add_header(variant, lesson.source_path.stem, lesson.source_name, lesson.root, points)


# How a lesson source becomes its lab and solution, step by step (as nbgrader's converters
# list their preprocessors). `build` then executes the solution (`execute_solution`) and
# writes both; `check` compares them, outputs stripped (`strip_outputs`), with the files.
STEPS = (
    ("split into lab and solution, stubs for the lab", split_into_lab_and_solution),
    ("validate the TODOs and checks", validate),
    ("stamp the course version", stamp_version),
    ("put the set-up code", put_setup_code),
    ("tag the unchecked outputs", tag_unchecked_outputs),
    ("add the header", add_header),
)


def split_variants(
    source_path: Path, root: Path = REPO_ROOT
) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
    """Reads a lesson source and returns its (lab, solution) notebooks, unexecuted.

    Runs `STEPS` in order.

    Raises:
        BuildError: if the source breaks a rule listed in this module's docstring.
    """
    lesson = Lesson(source_path, root)
    for _, step in STEPS:
        step(lesson)
    return lesson.variants


def _reject_empty_cells(notebook: nbformat.NotebookNode, text: str, source_name: str) -> None:
    """Raises BuildError naming the line of the first cell with no code or text."""
    starts = [n for n, line in enumerate(text.splitlines(), start=1) if line.startswith("# %%")]
    before_first_marker = len(notebook.cells) - len(starts)  # text above the first `# %%`
    for index, cell in enumerate(notebook.cells):
        if not cell.source.strip():
            line = starts[index - before_first_marker] if index >= before_first_marker else 1
            raise BuildError(
                f"{source_name}:{line}: an empty {cell.cell_type} cell. Delete its `# %%` line, "
                "or put code or text in it."
            )


def _new_cell(cell_type: str, source: str, metadata: dict, cell_id: str) -> nbformat.NotebookNode:
    """A cell with a stable id: `todo-n` and `check-n` from the TODO's number (they stay
    the same when cells are added above them), `cell-NN` by position for the others."""
    maker = nbformat.v4.new_code_cell if cell_type == "code" else nbformat.v4.new_markdown_cell
    cell = maker(source=source, metadata=copy.deepcopy(metadata))
    cell.id = cell_id
    return cell


def graded_note(points: dict[int, int]) -> str:
    """Returns the lab header's "What is graded" paragraph, with each TODO's points."""
    each = ", ".join(f"TODO {todo}: {n} point{'s' * (n != 1)}" for todo, n in points.items())
    return f"{GRADED_NOTE} Points: {each} ({sum(points.values())} in all)."


def _empty_notebook(source_name: str, variant: str) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
        "colab": {"provenance": [], "toc_visible": True},
        METADATA_KEY: {"source": source_name, "variant": variant},
    }
    return notebook


def _validate_lesson(lab: nbformat.NotebookNode, todos: list[int], source_name: str) -> None:
    if todos != list(range(1, len(todos) + 1)):
        raise BuildError(f"{source_name}: TODOs must be numbered 1..N in order; found {todos}.")
    objectives = [int(n) for n, todo in OBJECTIVE_LINE.findall(lab.cells[0].source) if n == todo]
    if objectives != todos:
        raise BuildError(
            f"{source_name}: the learning objectives in the first cell name TODOs {objectives}, "
            f"the code has TODOs {todos}. Number each objective like '1. ... (TODO 1).'"
        )
    cells = lab.cells
    for index, cell in enumerate(cells):
        todo = cell.metadata.get(METADATA_KEY, {}).get("todo")
        if todo is None:
            continue
        following = cells[index + 1] if index + 1 < len(cells) else None
        if following is None or following.metadata.get(METADATA_KEY, {}).get("check") != todo:
            raise BuildError(
                f"{source_name}: the cell of TODO {todo} must be followed by a check cell "
                f"calling checks.check_...(..., todo={todo})."
            )
    parameters = [c for c in cells if "parameters" in c.metadata.get("tags", [])]
    if len(parameters) != 1:
        raise BuildError(
            f"{source_name}: expected one cell tagged parameters; found {len(parameters)}."
        )


def _put_setup_code(
    notebook: nbformat.NotebookNode, stem: str, source_name: str, root: Path
) -> None:
    cells = notebook.cells
    setups = [i for i, c in enumerate(cells) if setup_cell.SETUP_TAG in c.metadata.get("tags", [])]
    if not setups:
        return
    if len(setups) > 1 or cells[setups[0]].cell_type != "code":
        raise BuildError(
            f"{source_name}: expected one code cell tagged {setup_cell.SETUP_TAG} (the build "
            f"puts the set-up code there); found {len(setups)}."
        )
    parameters = next(i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", []))
    has_backend = re.search(r"^BACKEND = ", cells[parameters].source, re.MULTILINE) is not None
    if has_backend and parameters > setups[0]:
        raise BuildError(
            f"{source_name}: the parameters cell sets BACKEND, so it must come before the cell "
            f"tagged {setup_cell.SETUP_TAG}, which reads it."
        )
    code = setup_cell.render(stem, has_backend_parameter=has_backend, root=root)
    cells[setups[0]].source = code
    cells[setups[0]].metadata.update(copy.deepcopy(setup_cell.CELL_METADATA))


def _tag_unchecked_outputs(notebook: nbformat.NotebookNode) -> None:
    for cell in notebook.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type != "code" or "# NBVAL_CHECK_OUTPUT" in cell.source:
            continue
        if "parameters" not in tags and "nbval-ignore-output" not in tags:
            cell.metadata["tags"] = [*tags, "nbval-ignore-output"]


def _add_header(
    notebook: nbformat.NotebookNode,
    stem: str,
    source_name: str,
    root: Path,
    points: dict[int, int],
) -> None:
    folder = "labs" if notebook.metadata[METADATA_KEY]["variant"] == "lab" else "solutions"
    title = notebook.cells[0]
    banner = (
        f"<!-- Generated from {source_name} by tools/build_notebooks.py. "
        f"Edit the source, then run: {BUILD_COMMAND} -->"
    )
    title.source = banner + "\n" + title.source
    try:
        repository = setup_cell.repository(root)
    except ValueError as error:
        raise BuildError(str(error)) from None
    parts = []
    if repository:  # Published: links that open this notebook at its version's tag.
        tag = f"v{setup_cell.course_version(root)}"
        colab = (
            f"https://colab.research.google.com/github/{repository}/blob/{tag}/"
            f"{folder}/{stem}.ipynb"
        )
        raw = f"https://raw.githubusercontent.com/{repository}/{tag}/{folder}/{stem}.ipynb"
        workbench = (
            "https://console.cloud.google.com/vertex-ai/workbench/deploy-notebook?"
            f"download_url={raw}"
        )
        parts.append(f"[Open in Colab]({colab}) · [Open in Vertex AI Workbench]({workbench})")
    if folder == "labs":
        parts.append(graded_note(points))
    else:
        parts.append(SOLUTION_NOTE.format(stem=stem))
    links = nbformat.v4.new_markdown_cell(source="\n\n".join(parts))
    links.id = "cell-links"
    notebook.cells.insert(1, links)


def to_text(notebook: nbformat.NotebookNode) -> str:
    """Returns the notebook as the exact text written to disk."""
    return nbformat.writes(notebook) + "\n"


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
    problems = []
    sources = lesson_sources(root)
    expected = {f"{folder}/{p.stem}.ipynb" for p in sources for folder in ("labs", "solutions")}
    for folder in ("labs", "solutions"):
        for path in sorted((root / folder).glob("*.ipynb")):
            if f"{folder}/{path.name}" not in expected:
                problems.append(
                    f"{folder}/{path.name} has no source in notebooks/. Delete it, or add "
                    f"notebooks/{path.stem}.py."
                )
    course = setup_cell.course_files(root)
    for source in sources:
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
    differ = sorted(name for name in embedded.keys() | course.keys()
                    if embedded.get(name) != course.get(name))  # fmt: skip
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
    """Writes labs/ and solutions/ from notebooks/; returns the files written."""
    written = []
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
    """Re-embeds the course in the committed notebooks' set-up cells; returns those written.

    Every change to `utils/` leaves every lab and solution embedding a stale course, and a
    full build executes every solution again. This rewrites only the source of each
    committed notebook's set-up cell, as the build would write it; every other cell,
    outputs included, stays as it is. `--check` still fails where anything else differs
    from the source.

    Raises:
        BuildError: if a notebook is missing, or its set-up cells are not the built ones.
    """
    written = []
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
            print(f"Re-embedded the course in {len(written)} notebook(s).")
            return 0
        build(REPO_ROOT, only=args.only, execute=not args.no_execute)
    except BuildError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
