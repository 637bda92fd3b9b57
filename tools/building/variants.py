"""The build's steps that make a lesson's lab and solution (unexecuted) from its source.

`split_variants` runs `STEPS` in order, one function each (nbgrader's preprocessors are the
model): split the source into lab and solution, validate the TODOs and checks, add the
hand-in cells, stamp the course version, put the set-up code, tag the unchecked outputs,
add the header. The rules each step enforces are listed in `tools/build_notebooks.py`'s
docstring; regions and stubs are `tools/building/regions.py`'s job, the hand-in cells
`tools/building/hand_in.py`'s, the header `tools/building/header.py`'s.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import jupytext
import nbformat

from tools.building import setup_cell
from tools.building.hand_in import add_hand_in
from tools.building.header import add_header
from tools.building.model import Lesson
from tools.building.outputs import METADATA_KEY
from tools.building.regions import BuildError, cell_regions, find_regions, make_stub, todo_number

REPO_ROOT = Path(__file__).resolve().parents[2]
OBJECTIVE_LINE = re.compile(r"^#?\s*(\d+)\.\s.*\(TODO (\d+)\)", re.MULTILINE)
CHECK_CALL = re.compile(r"checks\.check_\w+\((?:.|\n)*\btodo=(\d+)")
# A TODO cell's points: `# %% points=2` on its cell in the source; 1 when unset.
DEFAULT_POINTS = 1
# nbval's two ways to say "compare this cell's output": the sources' comment, the labs' tag.
CHECK_OUTPUT_MARKER = "# NBVAL_CHECK_OUTPUT"
CHECK_OUTPUT_TAG = "nbval-check-output"


def split_into_lab_and_solution(lesson: Lesson) -> None:
    """Reads the source; the lab gets each region's stub, the solution its code."""
    text = lesson.source_path.read_text()
    source_name = lesson.source_name
    find_regions(text, source_name)
    notebook = jupytext.reads(text, fmt="py:percent")
    _reject_empty_cells(notebook, text, source_name)
    lab, solution = _empty_notebook(source_name, "lab"), _empty_notebook(source_name, "solution")
    for variant in (lab, solution):  # The runtime the source's header asks Colab for.
        variant.metadata.update(copy.deepcopy(_header_runtime(notebook.metadata)))
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
    """Outputs marked checked get nbval's tag instead of the comment; the others are ignored.

    A source cell marks its output checked with the line `# NBVAL_CHECK_OUTPUT` or the tag
    `nbval-check-output`; the generated cell carries the tag only, so the learner never
    sees nbval's marker. Every other code cell (but the parameters) is tagged
    `nbval-ignore-output`, for strict nbval to skip.
    """
    for variant in lesson.variants:
        _tag_unchecked_outputs(variant)


# How a lesson source becomes its lab and solution, step by step (as nbgrader's converters
# list their preprocessors). tools/build_notebooks.py's `build` then executes the solution
# and writes both; its `check` compares them, outputs stripped, with the files.
STEPS = (
    ("split into lab and solution, stubs for the lab", split_into_lab_and_solution),
    ("validate the TODOs and checks", validate),
    ("add the hand-in cells", add_hand_in),
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


def _header_runtime(header: dict) -> dict:
    """The runtime a source's jupytext header asks for: Colab's `accelerator` and `colab`
    keys (labs 4 and 5: its TPU v5e-1), merged with the course's own `colab` settings."""
    found = {"accelerator": header["accelerator"]} if "accelerator" in header else {}
    if "colab" in header:
        found["colab"] = {"provenance": [], "toc_visible": True, **header["colab"]}
    return found


# The kernel's own words for itself (ipykernel's kernelspec and `language_info`, but the
# Python version, which differs by machine): JupyterLab writes them into a notebook as it
# starts the kernel, and marks the notebook changed where they differ.
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
}


def _empty_notebook(source_name: str, variant: str) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata = {
        "kernelspec": copy.deepcopy(KERNELSPEC),
        "language_info": copy.deepcopy(LANGUAGE_INFO),
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


def output_is_checked(cell: nbformat.NotebookNode) -> bool:
    """Whether nbval compares this code cell's output: tagged, or marked in the source."""
    return CHECK_OUTPUT_TAG in cell.metadata.get("tags", []) or any(
        line.strip() == CHECK_OUTPUT_MARKER for line in cell.source.splitlines()
    )


def _tag_unchecked_outputs(notebook: nbformat.NotebookNode) -> None:
    for cell in notebook.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type != "code":
            continue
        if output_is_checked(cell):
            lines = cell.source.splitlines()
            cell.source = "\n".join(line for line in lines if line.strip() != CHECK_OUTPUT_MARKER)
            if CHECK_OUTPUT_TAG not in tags:
                cell.metadata["tags"] = [*tags, CHECK_OUTPUT_TAG]
        elif "parameters" not in tags and "nbval-ignore-output" not in tags:
            cell.metadata["tags"] = [*tags, "nbval-ignore-output"]


def to_text(notebook: nbformat.NotebookNode) -> str:
    """Returns the notebook as the exact text written to disk."""
    return nbformat.writes(notebook) + "\n"
