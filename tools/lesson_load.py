"""How long each lab takes a learner to read and do: words, code, TODOs, outputs, execution.

Counts what a learner reads in `labs/NN_*.ipynb` (not the generated set-up, header and
hand-in cells; a fenced code block in the text is read as code), the output words of the
executed `solutions/NN_*.ipynb`, and its execution time, and turns them into minutes at
fixed reading rates:

    .venv/bin/python -m tools.lesson_load          # every lesson, and the core's total
    .venv/bin/python -m tools.lesson_load --check  # exit 1 if the core is over its targets

The rates are a reading estimate, not a measurement of learners: prose and code comments
at 150 words a minute, code at 10 lines a minute, printed output at 200 words a minute,
6 minutes for each TODO whose API the lab names before it and 12 for one whose API it
names nowhere before it (the learner looks it up), plus the solution's own execution time
on the build machine.

A TODO's API is what its solved cell calls that the lab's stub does not: each function or
method name and each keyword argument (`tf.io.parse_single_example`, `map`,
`num_parallel_calls`), less Python's builtins and what the lab itself defines. It is named
when the word stands in the learner's text or code of a cell above the TODO's code cell
(its own instruction included).
"""

from __future__ import annotations

import argparse
import ast
import builtins
import dataclasses
import re
import sys
from pathlib import Path

import nbformat

from tools.building.outputs import METADATA_KEY

REPO_ROOT = Path(__file__).resolve().parent.parent
CORE_LESSONS = ("01", "02", "03", "04", "05")
PROSE_WORDS_PER_MINUTE = 150
CODE_LINES_PER_MINUTE = 10
OUTPUT_WORDS_PER_MINUTE = 200
MINUTES_PER_TODO = 6
MINUTES_PER_UNNAMED_TODO = 12
# The targets of the core (labs 1-5): the original lab's two hours, with some room.
CORE_MINUTES_TARGET = 150
PROSE_WORDS_TARGET = 800
# Cells the build generates around the lesson: read once, not part of a lesson's load.
GENERATED_TAGS = {"setup", "hand_in"}
GENERATED_IDS = {"cell-links"}
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_WORD = re.compile(r"\w")


@dataclasses.dataclass(frozen=True)
class LessonLoad:
    """What one lab asks of a learner, counted, and the minutes it makes at the rates."""

    lesson: str
    prose_words: int
    code_lines: int
    comment_words: int
    todos: int
    output_words: int
    figures: int
    execution_minutes: float
    # TODOs whose API the lab names nowhere before them, with the names it does not.
    unnamed: tuple[tuple[int, tuple[str, ...]], ...] = ()

    @property
    def minutes(self) -> float:
        """The estimate: reading, doing the TODOs, reading outputs, waiting for cells."""
        return (
            (self.prose_words + self.comment_words) / PROSE_WORDS_PER_MINUTE
            + self.code_lines / CODE_LINES_PER_MINUTE
            + self.output_words / OUTPUT_WORDS_PER_MINUTE
            + (self.todos - len(self.unnamed)) * MINUTES_PER_TODO
            + len(self.unnamed) * MINUTES_PER_UNNAMED_TODO
            + self.execution_minutes
        )


def _learner_cells(lab: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [
        cell
        for cell in lab.cells
        if not GENERATED_TAGS & set(cell.metadata.get("tags", []))
        and cell.get("id") not in GENERATED_IDS
    ]


def _words(text: str) -> int:
    """Words: what splits on white space and holds a letter or digit (not `#`, `-`, `·`)."""
    return sum(1 for token in text.split() if _WORD.search(token))


def count_code(source: str) -> tuple[int, int]:
    """Returns (code lines, comment words) of a code cell: blank lines count as neither.

    Example:
        count_code("x = 1  # one\\n# two words\\n")  # (1, 3)
    """
    code_lines = comment_words = 0
    for line in source.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        code, _, comment = stripped.partition("#")
        if code.strip():
            code_lines += 1
        if comment:
            comment_words += _words(comment)
    return code_lines, comment_words


def split_fenced_code(markdown: str) -> tuple[str, str]:
    """Returns (the prose, the code) of a Markdown text: code is what ``` fences hold.

    Example:
        split_fenced_code("Run:\n```python\nx = 1\n```\n")  # ("Run:", "x = 1")
    """
    prose, code, fenced = [], [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        else:
            (code if fenced else prose).append(line)
    return "\n".join(prose), "\n".join(code)


def output_words(solution: nbformat.NotebookNode) -> tuple[int, int]:
    """Returns (words printed, figures shown) by the learner's cells of an executed notebook."""
    words = figures = 0
    for cell in _learner_cells(solution):
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                words += _words(output.text)
            elif output.output_type in ("execute_result", "display_data", "error"):
                data = output.get("data", {})
                if "image/png" in data or "image/svg+xml" in data or "image/jpeg" in data:
                    figures += 1
                elif "text/plain" in data:
                    words += _words(data["text/plain"])
                elif output.output_type == "error":
                    words += _words(f"{output.ename}: {output.evalue}")
    return words, figures


def called_names(source: str) -> set[str]:
    """Returns what a code cell calls: function and method names, keyword arguments.

    Python's builtins called by name (`len`, `list`) are left out; methods are kept, also
    where a builtin has their name (`dataset.map`).

    Example:
        called_names("d = d.map(f, num_parallel_calls=4)")  # {"map", "num_parallel_calls"}
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                names.add(node.func.attr)
            elif isinstance(node.func, ast.Name) and not hasattr(builtins, node.func.id):
                names.add(node.func.id)
            names.update(keyword.arg for keyword in node.keywords if keyword.arg)
    return names


def defined_names(sources: list[str]) -> set[str]:
    """Returns the names code cells define: functions, classes, assigned names, parameters."""
    names = set()
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
    return names


def unnamed_apis(
    lab: nbformat.NotebookNode, solution: nbformat.NotebookNode
) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """Each TODO whose API the lab names nowhere above its code cell, with what is unnamed.

    A TODO's API: what its solved cell (same cell id in `solution`) calls that the lab's
    stub does not (`called_names`), less the names the lab's cells define.
    """
    solved = {cell.get("id"): cell.source for cell in solution.cells if cell.cell_type == "code"}
    cells = _learner_cells(lab)
    own = defined_names([cell.source for cell in cells if cell.cell_type == "code"])
    unnamed, text_above = [], []
    for cell in cells:
        todo = cell.metadata.get(METADATA_KEY, {}).get("todo")
        if cell.cell_type == "code" and todo is not None and cell.get("id") in solved:
            needed = called_names(solved[cell["id"]]) - called_names(cell.source) - own
            above = "\n".join(text_above)
            missing = sorted(
                name for name in needed if not re.search(rf"\b{re.escape(name)}\b", above)
            )
            if missing:
                unnamed.append((todo, tuple(missing)))
        text_above.append(_HTML_COMMENT.sub("", cell.source))
    return tuple(unnamed)


def lesson_load(lab: nbformat.NotebookNode, solution: nbformat.NotebookNode) -> LessonLoad:
    """Counts what a lab asks of a learner, its outputs taken from the executed solution."""
    prose = code_lines = comment_words = 0
    todos = set()
    for cell in _learner_cells(lab):
        if cell.cell_type == "markdown":
            text, code = split_fenced_code(_HTML_COMMENT.sub("", cell.source))
            prose += _words(text)
            lines, comments = count_code(code)
            code_lines += lines
            comment_words += comments
        elif cell.cell_type == "code":
            lines, comments = count_code(cell.source)
            code_lines += lines
            comment_words += comments
            if "todo" in cell.metadata.get(METADATA_KEY, {}):
                todos.add(cell.metadata[METADATA_KEY]["todo"])
    words, figures = output_words(solution)
    seconds = solution.metadata.get(METADATA_KEY, {}).get("execution_seconds", 0)
    return LessonLoad(
        lesson=lab.metadata.get(METADATA_KEY, {}).get("source", "?"),
        prose_words=prose,
        code_lines=code_lines,
        comment_words=comment_words,
        todos=len(todos),
        output_words=words,
        figures=figures,
        execution_minutes=seconds / 60,
        unnamed=unnamed_apis(lab, solution),
    )


def every_lesson(root: Path = REPO_ROOT) -> dict[str, LessonLoad]:
    """The load of each lesson with a lab and a solution under `root`, by its number."""
    loads = {}
    for lab_path in sorted((root / "labs").glob("[0-9][0-9]_*.ipynb")):
        solution_path = root / "solutions" / lab_path.name
        if not solution_path.exists():
            raise FileNotFoundError(f"{lab_path.name} has no solution at {solution_path}")
        lab = nbformat.read(lab_path, as_version=4)
        solution = nbformat.read(solution_path, as_version=4)
        loads[lab_path.name[:2]] = dataclasses.replace(
            lesson_load(lab, solution), lesson=lab_path.stem
        )
    return loads


def over_targets(loads: dict[str, LessonLoad]) -> list[str]:
    """What in the core is over its targets, one sentence each; empty when all fit."""
    core = [loads[number] for number in CORE_LESSONS if number in loads]
    problems = [
        f"{load.lesson}: {load.prose_words:,} words of prose (target {PROSE_WORDS_TARGET:,})"
        for load in core
        if load.prose_words > PROSE_WORDS_TARGET
    ]
    total = sum(load.minutes for load in core)
    if total > CORE_MINUTES_TARGET:
        problems.append(f"labs 1-5 take about {total:.0f} minutes (target {CORE_MINUTES_TARGET})")
    return problems


def report(loads: dict[str, LessonLoad]) -> str:
    """A table of every lesson's counts and estimate, then the core's total."""
    header = (
        f"{'lesson':<28} {'prose':>6} {'code':>5} {'comm.':>6} {'TODOs':>5} "
        f"{'output':>6} {'figs':>4} {'run':>5} {'minutes':>7}"
    )
    rows = [header, "-" * len(header)]
    for load in loads.values():
        rows.append(
            f"{load.lesson:<28} {load.prose_words:>6,} {load.code_lines:>5} "
            f"{load.comment_words:>6,} {load.todos:>5} {load.output_words:>6,} "
            f"{load.figures:>4} {load.execution_minutes:>5.1f} {load.minutes:>7.0f}"
        )
    core = [loads[number] for number in CORE_LESSONS if number in loads]
    rows.append(
        f"Core (labs 1-5): about {sum(load.minutes for load in core):.0f} minutes, "
        f"{sum(load.prose_words for load in core):,} words of prose "
        f"(targets: {CORE_MINUTES_TARGET} minutes, {PROSE_WORDS_TARGET} words a lab)."
    )
    rows.append(
        f"Rates: prose and comments {PROSE_WORDS_PER_MINUTE} words/min, code "
        f"{CODE_LINES_PER_MINUTE} lines/min, output {OUTPUT_WORDS_PER_MINUTE} words/min, "
        f"{MINUTES_PER_TODO} min per TODO ({MINUTES_PER_UNNAMED_TODO} where the lab names its "
        "API nowhere before it), plus the solution's execution time."
    )
    for load in loads.values():
        for todo, names in load.unnamed:
            rows.append(
                f"{load.lesson}: TODO {todo} needs {', '.join(names)}, named nowhere before it."
            )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the core is over its targets"
    )
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="the course's checkout")
    args = parser.parse_args(argv)
    loads = every_lesson(args.root)
    print(report(loads))
    problems = over_targets(loads)
    for problem in problems:
        print(f"Over target: {problem}")
    return 1 if args.check and problems else 0


if __name__ == "__main__":
    sys.exit(main())
