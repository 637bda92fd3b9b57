"""Writes the committed solutions' numbers into the documents, or checks that they are there.

Each lesson's cell tagged `summary` prints what the lesson measured. This command copies
that printed text from `solutions/NN_*.ipynb` into whichever document holds the lesson's
pair of markers (README.md or a page of docs/: `DOCUMENTS`), so that no number in that
block is ever typed by hand:

    <!-- numbers:01_tf_data_basics:begin -->
    ...generated...
    <!-- numbers:01_tf_data_basics:end -->

It also writes, between `<!-- times:begin -->` and `<!-- times:end -->`, how long each
solution's execution took when the build ran it (`tpu_speed_pipelines.execution_seconds` in
the solution's metadata); between `<!-- labs:begin -->` and `<!-- labs:end -->`, the table of
the labs with each one's minutes to read and do (`tools.lesson_load`) and to run; and each
inline `<!-- fact:NAME -->VALUE<!-- /fact -->`:

- from the committed files, checked by `--check`: `lesson_minutes` (the lessons the course
  run runs with `requirements.txt` alone, in the build), `all_lesson_minutes`;
- measured on this machine, written only with `--measure` (never checked: they are this
  machine's): `venv_gb` (`du` of `.venv`), and with `--test-log FILE` (a pytest run's
  output) `test_count` and `test_minutes`, from pytest's last line.

Usage:
    .venv/bin/python -m tools.readme_numbers            # rewrite the blocks in the documents
    .venv/bin/python -m tools.readme_numbers --check    # exit 1, naming each block that differs
    .venv/bin/python -m tools.readme_numbers --measure [--test-log pytest.log]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import nbformat

from tools import lesson_load, run_course
from tools.building import lesson_parameters, setup_cell
from tools.building.outputs import EXECUTION_SECONDS, METADATA_KEY

REPO_ROOT = Path(__file__).resolve().parents[1]
SUMMARY_TAG = "summary"
COMMAND = "python -m tools.readme_numbers"
BLOCK = re.compile(
    r"(<!-- numbers:(?P<stem>[\w-]+):begin -->\n)(?P<body>.*?)(<!-- numbers:(?P=stem):end -->)",
    re.DOTALL,
)

# The documents that may hold blocks, relative to the repository's root.
DOCUMENTS = ("README.md", "docs/*.md")

TIMES = re.compile(r"(<!-- times:begin -->\n)(?P<body>.*?)(<!-- times:end -->)", re.DOTALL)
LABS = re.compile(r"(<!-- labs:begin -->\n)(?P<body>.*?)(<!-- labs:end -->)", re.DOTALL)
CLONE = re.compile(r"(<!-- clone:begin -->\n)(?P<body>.*?)(<!-- clone:end -->)", re.DOTALL)
# The clone's address until pyproject.toml names the repository the course is published at.
PLACEHOLDER_OWNER = "OWNER"
FACT = re.compile(r"(<!-- fact:(?P<name>\w+) -->)(?P<body>[^<]*)(<!-- /fact -->)")
# Facts of this machine, written only with --measure; facts from the committed solutions.
MEASURED_FACTS = ("test_count", "venv_gb", "test_minutes")
FACT_NAMES = (
    "lesson_minutes",
    "all_lesson_minutes",
    "lessons_run",
    "lessons_skipped",
    "lessons_partly_run",
)
# pytest's last line: "1,241 passed, 1 failed, 3 skipped in 5700.12s (1:35:00)".
PYTEST_SUMMARY = re.compile(r"^=* ?(?P<counts>\d[\w ,]*) in (?P<seconds>[\d.]+)s\b", re.M)


class NumbersError(Exception):
    """The solutions or the documents cannot give a block; the message says which and why."""


def summary_text(path: Path) -> str:
    """Returns what the cells tagged `summary` of an executed notebook printed (stdout).

    Raises:
        NumbersError: if the notebook has no such cell, or it printed nothing.
    """
    notebook = nbformat.read(path, as_version=4)
    printed = run_course.summary_text(notebook)
    if not printed:
        cells = [c for c in notebook.cells if SUMMARY_TAG in c.metadata.get("tags", [])]
        found = f"{len(cells)} cell(s) tagged {SUMMARY_TAG}, which printed nothing"
        raise NumbersError(
            f"{path.parent.name}/{path.name}: {found if cells else 'no cell tagged summary'}. "
            "Tag the lesson's summary cell `summary` and run: make build"
        )
    return printed


def render_block(path: Path, up: str = "") -> str:
    """Returns the generated text that goes between a solution's markers.

    Args:
        path: the executed solution.
        up: the way from the document's folder to the repository's root ("../" in docs/).
    """
    name = f"{path.parent.name}/{path.name}"
    return (
        f"Printed by [{name}]({up}{name})'s summary cell:\n\n```\n" + summary_text(path) + "\n```\n"
    )


def render_times(root: Path) -> str:
    """Returns the generated table of each solution's execution time, in minutes.

    Raises:
        NumbersError: if a solution has no recorded execution time.
    """
    rows = [
        (stem, minutes, lesson_parameters.OPTIONAL_MODULES.get(stem))
        for stem, minutes in execution_minutes(root).items()
    ]
    lines = [f"{'lesson':<28}{'minutes':>8}"]
    for stem, minutes, optional in rows:
        note = f"  run_course runs it only with {', '.join(optional)}" if optional else ""
        lines.append(f"{stem:<28}{minutes:>8.1f}{note}")
    required = sum(minutes for _, minutes, optional in rows if not optional)
    lines.append(f"{'all lessons':<28}{sum(minutes for _, minutes, _ in rows):>8.1f}")
    if required != sum(minutes for _, minutes, _ in rows):
        skipped = ", ".join(stem[:2] for stem, _, optional in rows if optional)
        lines.append(f"{'without ' + skipped:<28}{required:>8.1f}")
    return (
        "How long each solution took to execute in the build (`make build`, full parameters; "
        "its `execution_seconds`):\n\n```\n" + "\n".join(lines) + "\n```\n"
    )


def execution_minutes(root: Path) -> dict[str, float]:
    """Returns each solution's execution minutes in the build, by its stem.

    Raises:
        NumbersError: if a solution has no recorded execution time.
    """
    key, field = METADATA_KEY, EXECUTION_SECONDS
    minutes = {}
    for path in sorted((root / "solutions").glob("[0-9][0-9]_*.ipynb")):
        seconds = nbformat.read(path, as_version=4).metadata.get(key, {}).get(field)
        if seconds is None:
            raise NumbersError(
                f"solutions/{path.name} has no execution time ({key}.{field} in its metadata): "
                "it was not executed by the build. Run: make build"
            )
        minutes[path.stem] = seconds / 60
    return minutes


def render_clone(root: Path) -> str:
    """Returns the README's clone command, for pyproject.toml's `repository` (or a placeholder)."""
    repository = setup_cell.repository(root)
    name = setup_cell.read_pyproject(root)["project"]["name"]
    where = repository or f"{PLACEHOLDER_OWNER}/{name}"
    folder = where.split("/")[1]
    lines = ["```bash", f"git clone https://github.com/{where}.git && cd {folder}", "```"]
    return "\n".join(lines) + "\n"


def _title(lab: Path) -> str:
    """The lab's first `# ` heading."""
    for cell in nbformat.read(lab, as_version=4).cells:
        found = re.search(r"^# (.+)$", cell.source, re.M) if cell.cell_type == "markdown" else None
        if found:
            return found[1].strip()
    raise NumbersError(f"labs/{lab.name} has no title (a markdown line starting with '# ').")


def render_labs(root: Path, up: str = "") -> str:
    """Returns the labs table: each lab and solution, its minutes to read and do, to run.

    Args:
        root: the repository.
        up: the way from the document's folder to the repository's root ("../" in docs/).
    """
    loads = lesson_load.every_lesson(root)
    run = execution_minutes(root)
    rows = [
        "| lab | minutes to read and do | minutes to run |",
        "| --- | ---: | ---: |",
    ]
    for load in loads.values():
        name = load.lesson
        title = _title(root / "labs" / f"{name}.ipynb").replace("|", "\\|")
        rows.append(
            f"| [{title}]({up}labs/{name}.ipynb) ([solution]({up}solutions/{name}.ipynb)) "
            f"| {load.minutes:.0f} | {run[name]:.1f} |"
        )
    core = [loads[number] for number in lesson_load.CORE_LESSONS if number in loads]
    rows.append(
        f"| labs 1-5, the core | {sum(load.minutes for load in core):.0f} "
        f"| {sum(run[load.lesson] for load in core):.1f} |"
    )
    return "\n".join(rows) + "\n"


def checked_facts(root: Path) -> dict[str, str]:
    """Returns the inline facts that follow from the committed solutions, by name."""
    run = execution_minutes(root)
    alone = [m for stem, m in run.items() if stem not in lesson_parameters.OPTIONAL_MODULES]
    numbers = [int(stem[:2]) for stem in run]
    skipped = [int(stem[:2]) for stem in lesson_parameters.OPTIONAL_MODULES]
    # To a tenth, as the times block prints them: the README and docs/commands.md agree.
    values = (
        f"{sum(alone):.1f}",
        f"{sum(run.values()):.1f}",
        _number_list([n for n in numbers if n not in skipped]),
        _number_list(skipped),
        _number_list([int(stem[:2]) for stem in run_course.PARTS_THAT_SKIP]),
    )
    return dict(zip(FACT_NAMES, values, strict=True))


def _number_list(numbers: list[int]) -> str:
    """Lesson numbers as a reader writes them: [1, 2, 3, 5, 7] -> "1-3, 5 and 7"."""
    runs: list[list[int]] = []
    for number in sorted(numbers):
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    parts = [f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(map(str, run)) for run in runs]
    words = ", ".join(parts).rsplit(", ", 1)
    return " and ".join(words)


def measured_facts(root: Path, test_log: Path | None) -> dict[str, str]:
    """Measures this machine's facts: `.venv`'s size; from a pytest log, tests and minutes.

    The test count is what pytest's last line reports (passed, failed, skipped, errors), the
    count a reader sees, not `--collect-only`'s: under `-n 2` the controller's session checks
    are collected but reported only when they fail.

    Raises:
        NumbersError: if `test_log` has no pytest summary line.
    """
    facts = {"venv_gb": f"{_disk_bytes(root / '.venv') / 1e9:.1f}"}
    if test_log is not None:
        summary = PYTEST_SUMMARY.findall(test_log.read_text(errors="replace"))
        if not summary:
            raise NumbersError(f"{test_log}: no pytest summary line ('... passed ... in 12.34s').")
        counts, seconds = summary[-1]
        reported = re.findall(r"(\d+) (?:passed|failed|skipped|errors?|xfailed|xpassed)\b", counts)
        facts["test_count"] = f"{sum(int(count) for count in reported):,}"
        facts["test_minutes"] = f"{float(seconds) / 60:.0f}"
    return facts


def _disk_bytes(folder: Path) -> int:
    """The disk space `folder` takes, as `du` counts it (allocated blocks, links once)."""
    if not folder.is_dir():
        raise NumbersError(f"{folder} does not exist: make the virtual environment first.")
    seen, total = set(), 0
    for directory, _, files in os.walk(folder):
        for name in files:
            stat = os.lstat(os.path.join(directory, name))
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_blocks * 512
    return total


def fill_facts(text: str, facts: dict[str, str], name: str) -> tuple[str, list[str]]:
    """Returns `text` with each inline fact named in `facts` set, and the names that changed.

    Raises:
        NumbersError: a fact's name is neither checked nor measured.
    """
    changed = []

    def replace(match: re.Match) -> str:
        fact = match["name"]
        if fact not in facts:
            if fact in MEASURED_FACTS:
                return match[0]
            raise NumbersError(
                f"{name}: no fact called {fact!r}; known: "
                f"{', '.join(sorted({*FACT_NAMES, *MEASURED_FACTS}))}."
            )
        if facts[fact] != match["body"]:
            changed.append(fact)
        return match[1] + facts[fact] + match[4]

    return FACT.sub(replace, text), changed


def documents(root: Path) -> list[Path]:
    """Returns the documents that may hold numbers blocks, README.md first."""
    return [path for pattern in DOCUMENTS for path in sorted(root.glob(pattern))]


def update(
    texts: dict[str, str], root: Path, facts: dict[str, str] | None = None
) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Returns each document's text with its generated blocks and facts redone, and what changed.

    Args:
        texts: {document path relative to `root`: its text}.
        root: the repository.
        facts: the measured facts to write too (`measured_facts`); None writes none.

    Returns:
        ({document: new text}, [(document, stem, "times", "labs" or a fact's name) of each
        block or fact that changed]).

    Raises:
        NumbersError: a block names no solution in `root/solutions`, or a committed
            solution with a summary cell has no block in any document.
    """
    changed: list[tuple[str, str]] = []
    stems_found: set[str] = set()
    updated = {}
    named = {match["name"] for text in texts.values() for match in FACT.finditer(text)}
    all_facts = {**(checked_facts(root) if named & set(FACT_NAMES) else {}), **(facts or {})}
    for name, text in texts.items():
        up = "../" * name.count("/")

        def replace(match: re.Match, name=name, up=up) -> str:
            stem = match["stem"]
            stems_found.add(stem)
            path = root / "solutions" / f"{stem}.ipynb"
            if not path.exists():
                raise NumbersError(
                    f"{name} has a numbers block for {stem}, but solutions/{stem}.ipynb does "
                    "not exist. Remove the block or fix its name."
                )
            body = render_block(path, up)
            if body != match["body"]:
                changed.append((name, stem))
            return match[1] + body + match[4]

        text = BLOCK.sub(replace, text)
        blocks = (
            ("times", TIMES, render_times),
            ("labs", LABS, lambda root, up=up: render_labs(root, up)),
            ("clone", CLONE, render_clone),
        )
        for kind, pattern, render in blocks:
            if pattern.search(text):
                body = render(root)
                if pattern.search(text)["body"] != body:
                    changed.append((name, kind))
                text = pattern.sub(lambda match, body=body: match[1] + body + match[3], text)
        text, facts_changed = fill_facts(text, all_facts, name)
        changed.extend((name, fact) for fact in facts_changed)
        updated[name] = text
    for path in sorted((root / "solutions").glob("[0-9][0-9]_*.ipynb")):
        if path.stem not in stems_found:
            raise NumbersError(
                f"No document ({', '.join(texts)}) has a numbers block for "
                f"solutions/{path.name}. Add the lines <!-- numbers:{path.stem}:begin --> and "
                f"<!-- numbers:{path.stem}:end --> where its numbers belong, then run: {COMMAND}"
            )
    return updated, changed


def _what_differs(stem: str) -> str:
    if stem == "times":
        return "the times block differs from the solutions' execution times"
    if stem == "labs":
        return "the labs table differs from the labs and solutions (tools.lesson_load)"
    if stem == "clone":
        return "the clone command differs from pyproject.toml's repository"
    if stem in FACT_NAMES:
        return f"the fact {stem} differs from the solutions"
    return f"the numbers block of {stem} differs from solutions/{stem}.ipynb"


def main(argv: list[str] | None = None, root: Path = REPO_ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; write nothing")
    parser.add_argument(
        "--measure", action="store_true", help="also measure this machine's facts and write them"
    )
    parser.add_argument(
        "--test-log",
        type=Path,
        help="with --measure: a pytest run's output, for test_count and test_minutes",
    )
    args = parser.parse_args(argv)
    if args.test_log and not args.measure:
        parser.error("--test-log goes with --measure")
    paths = {path.relative_to(root).as_posix(): path for path in documents(root)}
    try:
        facts = measured_facts(root, args.test_log) if args.measure else None
        texts, changed = update(
            {name: path.read_text() for name, path in paths.items()}, root, facts
        )
    except NumbersError as error:
        print(error, file=sys.stderr)
        return 1
    if args.check:
        for name, stem in changed:
            print(f"{name}: {_what_differs(stem)}. Run: {COMMAND}", file=sys.stderr)
        if not changed:
            print("The documents' numbers blocks match the committed solutions.")
        return 1 if changed else 0
    for name, path in paths.items():
        stems = [stem for document, stem in changed if document == name]
        if stems:
            path.write_text(texts[name])
            print(f"{name}: {len(stems)} numbers block(s) rewritten: {', '.join(stems)}.")
    if not changed:
        print("No numbers block changed.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
