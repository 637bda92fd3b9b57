"""The reports of a grading run, from the `Grade`s: the files the README lists.

Takes every submission's `Grade`, the output folder and the sandbox's description; writes
`grades.csv`, `scores.md`, `review.md`, `feedback/<learner>-<lab>.md` and
`junit/<learner>-<lab>.xml` (`feedback.py` makes the last two).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from tools.grading.feedback import (
    as_code_block,
    feedback,
    junit_xml,
    markdown_text,
    spreadsheet_cell,
)
from tools.grading.model import Grade

GRADER_FILES = (
    "grades.csv",
    "scores.md",
    "review.md",
    "feedback/*.md",
    "junit/*.xml",
    "canvas.csv",
    "moodle.csv",
)


def _graded(grade: Grade) -> bool:
    return grade.status == "graded"


def report_names(grades: list[Grade]) -> list[str]:
    """Each submission's feedback and JUnit file name, `<learner>-<lab>`, unique in the class.

    Names that differ only in characters a file name drops (`Kim Lee`, `Kim_Lee`) get
    `-2`, `-3`, ... in the order of `grades`, so no learner's file overwrites another's.
    """
    names, taken = [], set()
    for grade in grades:
        base = re.sub(r"[^\w.-]+", "_", f"{grade.learner}-{grade.lab or 'unknown'}")
        name, count = base, 1
        while name.lower() in taken:
            count += 1
            name = f"{base}-{count}"
        taken.add(name.lower())
        names.append(name)
    return names


def _mark(grade: Grade, todo: int) -> str:
    if todo not in grade.points:
        return ""
    return "pass" if grade.passed.get(todo) else "fail"


HEADER = [
    "learner",
    "lab",
    "version",
    "total",
    "maximum",
    "flags",
    "status",
    "submission",
    "feedback",
    "submitted",
    "late days",
    "penalty %",
    "final",
    "overrides",
]


def _row(grade: Grade, name: str, max_todo: int) -> list:
    """A grades.csv row; one that was not graded has no points (not zeros), one missing 0."""
    graded = _graded(grade)
    earned = grade.earned if graded else {}
    overrides = "; ".join(
        f"TODO {todo}: {points:g} ({why})"
        for todo, (points, why) in sorted(grade.overridden.items())
    )
    return [
        grade.learner,
        grade.lab,
        grade.version,
        *(f"{earned[n]:g}" if n in earned else "" for n in range(1, max_todo + 1)),
        f"{grade.total:g}" if graded else "",
        grade.maximum if graded else "",
        "; ".join(grade.flags),
        grade.status,
        grade.submission,
        f"feedback/{name}.md" if grade.submission else "",
        grade.submitted.isoformat(timespec="minutes") if grade.submitted else "",
        grade.late_days or "",
        f"{grade.penalty_percent:g}" if grade.late_days else "",
        f"{grade.final:g}" if graded else "0" if grade.status == "missing" else "",
        overrides,
    ]


def write_grades_csv(grades: list[Grade], path: Path, max_todo: int) -> None:
    """One row per submission (and per missing one): learner, lab, points per TODO, ...;
    each cell one that no spreadsheet runs (`spreadsheet_cell`)."""
    header = [*HEADER[:3], *(f"TODO {n}" for n in range(1, max_todo + 1)), *HEADER[3:]]
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(header)
        for grade, name in zip(grades, report_names(grades), strict=True):
            writer.writerow([spreadsheet_cell(value) for value in _row(grade, name, max_todo)])


def scores_markdown(grades: list[Grade], isolation: str, max_todo: int) -> str:
    """The instructor's table: pass/fail per TODO, then each failure, note and flag."""
    columns = [f"TODO {n}" for n in range(1, max_todo + 1)]
    lines = [
        f"Sandbox: {isolation}",
        "",
        "| submission | learner | lab | status | " + " | ".join(columns) + " | total | flags |",
        "|" + " --- |" * (len(columns) + 6),
    ]
    for grade in grades:
        marks = " | ".join(_mark(grade, n) for n in range(1, max_todo + 1))
        total = f"{grade.final:g}/{grade.maximum}" if _graded(grade) else "not graded"
        cells = [grade.submission, grade.learner, grade.lab, grade.status]
        lines.append(
            f"| {' | '.join(markdown_text(cell) for cell in cells)} | "
            f"{marks} | {total} | {', '.join(grade.flags)} |"
        )
    lines.append("")
    for grade in grades:
        submission = markdown_text(grade.submission)
        for todo in sorted(grade.points) if _graded(grade) else []:
            if not grade.passed.get(todo):
                message = markdown_text(grade.messages.get(todo, ""))
                lines.append(f"- {submission}, TODO {todo}: {message}")
        for note in grade.notes:
            lines.append(f"- {submission}: {markdown_text(note)}")
        if grade.flags:
            lines.append(
                f"- {submission}: flagged for review ({', '.join(grade.flags)}); still "
                "graded; see review.md"
            )
    return "\n".join(lines) + "\n"


def review_markdown(grades: list[Grade]) -> str:
    """Each flagged submission's notes, and its code as a diff against the lab (in a block
    that no line of it can close), or `None.`"""
    review = ["# Flagged submissions", ""]
    for grade in grades:
        if grade.flags:
            title = f"## {markdown_text(f'{grade.submission} ({grade.learner}, {grade.lab})')}: "
            review += [title + ", ".join(grade.flags), ""]
            review += [f"- {markdown_text(note)}" for note in grade.notes]
            review += ["", *as_code_block(grade.diff, "diff"), ""]
    if len(review) == 2:
        review.append("None.")
    return "\n".join(review) + "\n"


def write_reports(grades: list[Grade], output_dir: Path, isolation: str) -> None:
    """Writes grades.csv, scores.md, review.md and one feedback file per submission."""
    max_todo = max([max(g.points, default=0) for g in grades] + [0])
    write_grades_csv(grades, output_dir / "grades.csv", max_todo)
    (output_dir / "scores.md").write_text(scores_markdown(grades, isolation, max_todo))
    (output_dir / "review.md").write_text(review_markdown(grades))
    (output_dir / "feedback").mkdir(exist_ok=True)
    (output_dir / "junit").mkdir(exist_ok=True)
    for grade, name in zip(grades, report_names(grades), strict=True):
        if not grade.submission:  # A learner of the roster who handed nothing in.
            continue
        (output_dir / "feedback" / f"{name}.md").write_text(feedback(grade))
        (output_dir / "junit" / f"{name}.xml").write_bytes(junit_xml(grade))


def remove_old_reports(output_dir: Path) -> None:
    """Deletes only what an earlier grading wrote (`GRADER_FILES`); nothing else."""
    for pattern in GRADER_FILES:
        for old in output_dir.glob(pattern):
            old.unlink()
