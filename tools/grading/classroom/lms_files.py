"""The LMS's own import files, from the gradebook: Canvas's gradebook CSV and Moodle's.

Takes the gradebook's `Grade`s and the roster; gives `canvas.csv` and `moodle.csv`, one row
per roster learner and one column per lab, each cell the final points (a missing
submission 0; one that could not be graded empty, for the instructor to decide). No cell
is a formula a spreadsheet would run, whatever the roster or a file's name says.

- Canvas (Grades > Import): the columns `Student`, `ID`, `SIS User ID`, `SIS Login ID`,
  `Section` come from the roster (Canvas's own gradebook export); a lab's column is the
  export's assignment column for that lab (`Lab 1 ... (12345)`: the id in parentheses
  makes Canvas update that assignment), else the lab's name (Canvas then makes a new
  assignment).
- Moodle (Grades > Import > CSV file): the first column identifies the learner (`Email
  address` where the roster has one, else `ID number`); on Moodle's import page map it
  to the user field of the same name and each lab column to its grade item.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from tools.grading.feedback import spreadsheet_cell
from tools.grading.model import Grade

CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
EMAIL_COLUMNS = ("Email address", "Email", "email")


def finals(grades: list[Grade]) -> dict[tuple[str, str], str]:
    """(learner, lab) -> the final points as text: the kept submission's, or 0 if missing."""
    found = {}
    for grade in grades:
        if grade.status == "graded":
            found[grade.learner, grade.lab] = f"{grade.final:g}"
        elif grade.status == "missing":
            found[grade.learner, grade.lab] = "0"
        elif not grade.status.startswith("set aside"):
            found.setdefault((grade.learner, grade.lab), "")
    return found


def lab_column(lab: str, header: list[str]) -> str:
    """The roster's assignment column for `lab` (`Lab 1 ... (123)` for `01_...`), or its name."""
    number = int(lab[:2])
    pattern = re.compile(rf"\b(?:Lab|Lesson)\s*0?{number}\b.*\(\d+\)\s*$", re.IGNORECASE)
    return next((name for name in header if pattern.search(name)), lab)


def cells(row: list) -> list[str]:
    """A row's cells, each one that no spreadsheet runs (`feedback.spreadsheet_cell`)."""
    return [spreadsheet_cell(value) for value in row]


def write_canvas_csv(grades: list[Grade], roster: list[dict], path: Path) -> None:
    labs = sorted({grade.lab for grade in grades if grade.lab})
    header = list(roster[0]) if roster else []
    points = finals(grades)
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(cells([*CANVAS_COLUMNS, *(lab_column(lab, header) for lab in labs)]))
        for learner in roster:
            known = [learner.get(name, "") for name in CANVAS_COLUMNS]
            known[1] = known[1] or learner["id"]
            writer.writerow(
                cells([*known, *(points.get((learner["id"], lab), "") for lab in labs)])
            )


def write_moodle_csv(grades: list[Grade], roster: list[dict], path: Path) -> None:
    labs = sorted({grade.lab for grade in grades if grade.lab})
    email = next((name for name in EMAIL_COLUMNS if roster and name in roster[0]), None)
    points = finals(grades)
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(cells(["Email address" if email else "ID number", *labs]))
        for learner in roster:
            identity = learner[email] if email else learner["id"]
            writer.writerow(
                cells([identity, *(points.get((learner["id"], lab), "") for lab in labs)])
            )
