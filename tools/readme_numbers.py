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
the solution's metadata), so that the README's times cover every lesson and cannot drift.

Usage:
    python -m tools.readme_numbers            # rewrite the blocks in the documents
    python -m tools.readme_numbers --check    # exit 1, naming each block that differs
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

from tools import build_notebooks, lesson_parameters, run_course

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
    key, field = build_notebooks.METADATA_KEY, build_notebooks.EXECUTION_SECONDS
    rows = []
    for path in sorted((root / "solutions").glob("[0-9][0-9]_*.ipynb")):
        seconds = nbformat.read(path, as_version=4).metadata.get(key, {}).get(field)
        if seconds is None:
            raise NumbersError(
                f"solutions/{path.name} has no execution time ({key}.{field} in its metadata): "
                "it was not executed by the build. Run: make build"
            )
        rows.append((path.stem, seconds, lesson_parameters.OPTIONAL_MODULES.get(path.stem)))
    lines = [f"{'lesson':<28}{'minutes':>8}"]
    for stem, seconds, optional in rows:
        note = f"  run_course runs it only with {', '.join(optional)}" if optional else ""
        lines.append(f"{stem:<28}{seconds / 60:>8.1f}{note}")
    required = sum(seconds for _, seconds, optional in rows if not optional)
    lines.append(f"{'all lessons':<28}{sum(seconds for _, seconds, _ in rows) / 60:>8.1f}")
    if required != sum(seconds for _, seconds, _ in rows):
        skipped = ", ".join(stem[:2] for stem, _, optional in rows if optional)
        lines.append(f"{'without ' + skipped:<28}{required / 60:>8.1f}")
    return (
        "How long each solution took to execute in the build (`make build`, full parameters; "
        "its `execution_seconds`):\n\n```\n" + "\n".join(lines) + "\n```\n"
    )


def documents(root: Path) -> list[Path]:
    """Returns the documents that may hold numbers blocks, README.md first."""
    return [path for pattern in DOCUMENTS for path in sorted(root.glob(pattern))]


def update(texts: dict[str, str], root: Path) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Returns each document's text with its numbers blocks regenerated, and what changed.

    Args:
        texts: {document path relative to `root`: its text}.
        root: the repository.

    Returns:
        ({document: new text}, [(document, stem or "times") of each block that changed]).

    Raises:
        NumbersError: a block names no solution in `root/solutions`, or a committed
            solution with a summary cell has no block in any document.
    """
    changed: list[tuple[str, str]] = []
    stems_found: set[str] = set()
    updated = {}
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
        if TIMES.search(text):
            times = render_times(root)
            if TIMES.search(text)["body"] != times:
                changed.append((name, "times"))
            text = TIMES.sub(lambda match, times=times: match[1] + times + match[3], text)
        updated[name] = text
    for path in sorted((root / "solutions").glob("[0-9][0-9]_*.ipynb")):
        if path.stem not in stems_found:
            raise NumbersError(
                f"No document ({', '.join(texts)}) has a numbers block for "
                f"solutions/{path.name}. Add the lines <!-- numbers:{path.stem}:begin --> and "
                f"<!-- numbers:{path.stem}:end --> where its numbers belong, then run: {COMMAND}"
            )
    return updated, changed


def main(argv: list[str] | None = None, root: Path = REPO_ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; write nothing")
    args = parser.parse_args(argv)
    paths = {path.relative_to(root).as_posix(): path for path in documents(root)}
    try:
        texts, changed = update({name: path.read_text() for name, path in paths.items()}, root)
    except NumbersError as error:
        print(error, file=sys.stderr)
        return 1
    if args.check:
        for name, stem in changed:
            what = (
                "the times block differs from the solutions' execution times"
                if stem == "times"
                else f"the numbers block of {stem} differs from solutions/{stem}.ipynb"
            )
            print(f"{name}: {what}. Run: {COMMAND}", file=sys.stderr)
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
