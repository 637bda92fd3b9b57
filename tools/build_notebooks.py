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

`--check` builds in memory, writes nothing, and fails naming each generated file that
differs from what its source gives (outputs aside), each stale file, and each solution
that was never executed.

Usage:
    python -m tools.build_notebooks            # rebuild everything (executes solutions)
    python -m tools.build_notebooks --check    # compare only
    python -m tools.build_notebooks --only 01 --no-execute
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import re
import sys
import tempfile
import textwrap
from pathlib import Path

import jupytext
import nbformat

from tools import setup_cell
from tools.lesson_parameters import KERNEL_OPTIONS
from utils import progress

REPO_ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
TODO_LINE = re.compile(r"^\s*# TODO (\d+):")
OBJECTIVE_LINE = re.compile(r"^#?\s*(\d+)\.\s.*\(TODO (\d+)\)", re.MULTILINE)
CHECK_CALL = re.compile(r"checks\.check_\w+\((?:.|\n)*\btodo=(\d+)")
BUILD_COMMAND = "make build"
METADATA_KEY = "tpu_speed_pipelines"
# A TODO cell's points: `# %% points=2` on its cell in the source; 1 when unset.
DEFAULT_POINTS = 1
# In a solution's metadata: how long its execution took, in seconds (the README's times).
EXECUTION_SECONDS = "execution_seconds"
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


def _cell_regions(lines: list[str]) -> list[tuple[int, int]]:
    regions, begin = [], None
    for index, line in enumerate(lines):
        if line.strip() == BEGIN:
            begin = index
        elif line.strip() == END:
            regions.append((begin, index))
    return regions


def _todo_number(lines: list[str], begin: int, where: str) -> int:
    for line in reversed(lines[:begin]):
        match = TODO_LINE.match(line)
        if match:
            return int(match.group(1))
    raise BuildError(f"{where}: a solution region with no `# TODO n:` comment before it.")


def split_variants(
    source_path: Path, root: Path = REPO_ROOT
) -> tuple[nbformat.NotebookNode, nbformat.NotebookNode]:
    """Reads a lesson source and returns its (lab, solution) notebooks, unexecuted.

    Raises:
        BuildError: if the source breaks a rule listed in this module's docstring.
    """
    source_name = source_path.relative_to(root).as_posix()
    text = source_path.read_text()
    find_regions(text, source_name)
    notebook = jupytext.reads(text, fmt="py:percent")
    _reject_empty_cells(notebook, text, source_name)
    lab, solution = _empty_notebook(source_name, "lab"), _empty_notebook(source_name, "solution")
    todos: list[int] = []
    for index, cell in enumerate(notebook.cells):
        where = f"{source_name} (cell {index + 1})"
        lines = cell.source.splitlines()
        regions = _cell_regions(lines) if cell.cell_type == "code" else []
        lab_lines, solution_lines, last = [], [], 0
        numbers = set()
        for begin, end in regions:
            todo = _todo_number(lines, begin, where)
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
    _validate_lesson(lab, todos, source_name)
    points = {
        c.metadata[METADATA_KEY]["todo"]: c.metadata[METADATA_KEY]["points"]
        for c in lab.cells
        if "todo" in c.metadata.get(METADATA_KEY, {})
    }
    for variant in (lab, solution):
        version_root = root if (root / "pyproject.toml").exists() else REPO_ROOT
        variant.metadata[METADATA_KEY]["version"] = setup_cell.course_version(version_root)
        _put_setup_code(variant, source_path.stem, source_name, root)
        _tag_unchecked_outputs(variant)
        _add_header(variant, source_path.stem, source_name, root, points)
    return lab, solution


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


def strip_outputs(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Returns a copy with outputs, execution counts and the execution time removed."""
    stripped = copy.deepcopy(notebook)
    stripped.metadata.get(METADATA_KEY, {}).pop(EXECUTION_SECONDS, None)
    for cell in stripped.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return stripped


def execute_solution(
    notebook: nbformat.NotebookNode, *, cwd: Path, parameters: dict | None = None
) -> nbformat.NotebookNode:
    """Runs a notebook with papermill in `cwd`; returns a copy of it with the outputs.

    Only outputs, execution counts and the run's duration (papermill's, in whole seconds,
    as `tpu_speed_pipelines.execution_seconds`: the README's lesson times) are taken from
    the run, so the metadata papermill and the kernel add (timestamps, versions, empty
    tags) never reach the file; the outputs show machine paths portably
    (`without_machine_paths`).
    """
    import papermill

    os.environ.setdefault(progress.DISABLE_ENV_VAR, "1")
    with tempfile.TemporaryDirectory() as scratch:
        unexecuted, executed = Path(scratch) / "in.ipynb", Path(scratch) / "out.ipynb"
        nbformat.write(notebook, unexecuted)
        papermill.execute_notebook(
            str(unexecuted),
            str(executed),
            parameters=parameters or {},
            cwd=str(cwd),
            progress_bar=False,
            **KERNEL_OPTIONS,
        )
        executed_notebook = nbformat.read(executed, as_version=4)
        executed_cells = executed_notebook.cells
    result = copy.deepcopy(notebook)
    duration = executed_notebook.metadata.get("papermill", {}).get("duration")
    if duration is not None:
        result.metadata.setdefault(METADATA_KEY, {})[EXECUTION_SECONDS] = round(duration)
    if len(executed_cells) != len(result.cells):
        raise BuildError("papermill added cells; build solutions with their default parameters.")
    for cell, executed_cell in zip(result.cells, executed_cells, strict=True):
        if cell.cell_type == "code":
            cell.outputs = without_machine_paths(executed_cell.outputs)
            cell.execution_count = executed_cell.execution_count
    return result


def without_machine_paths(outputs: list, home: Path | None = None) -> list:
    """Returns `outputs` with the home folder shown as `~` and temporary folders as `$TMPDIR`.

    A committed solution then prints `~/.cache/tpu_speed_pipelines/...`, as the README
    names the cache, and `$TMPDIR/...` for a folder made by `tempfile`, rather than the
    paths of the machine that built it.
    """
    home_prefix = str(home or Path.home()).rstrip("/") + "/"
    temporary = re.compile(re.escape(tempfile.gettempdir().rstrip("/")) + r"/tmp\w+/")

    def portable(text: str) -> str:
        return temporary.sub("$TMPDIR/", text.replace(home_prefix, "~/"))

    outputs = copy.deepcopy(outputs)
    for output in outputs:
        if "text" in output:
            output["text"] = portable(output["text"])
        for kind, value in output.get("data", {}).items():
            if kind.startswith("text/") and isinstance(value, str):
                output["data"][kind] = portable(value)
    return outputs


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
    cells = [c for c in notebook.cells if setup_cell.SETUP_TAG in c.metadata.get("tags", [])]
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

    def setup_cells(notebook):
        return [c for c in notebook.cells if setup_cell.SETUP_TAG in c.metadata.get("tags", [])]

    result = copy.deepcopy(built)
    for disk_cell, cell in zip(setup_cells(on_disk), setup_cells(result), strict=False):
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; write nothing")
    parser.add_argument("--only", help="build only the lessons whose file name starts so")
    parser.add_argument("--no-execute", action="store_true", help="write solutions unexecuted")
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
        build(REPO_ROOT, only=args.only, execute=not args.no_execute)
    except BuildError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
