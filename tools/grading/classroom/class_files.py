"""The instructor's own files for a class: the roster, the overrides, due dates, and when
each submission was handed in.

Takes paths and command-line values; gives plain data for `gradebook.py`, or a
`ValueError` that names the file (and row) or the value to fix.
"""

from __future__ import annotations

import csv
import datetime
import re
from pathlib import Path

ID_COLUMNS = ("ID", "id", "learner", "Student ID", "ID number", "SIS User ID")
OVERRIDE_COLUMNS = ("learner", "lab", "todo", "points", "reason")


def read_roster(path: Path) -> list[dict[str, str]]:
    """The roster's learners (rows with an id), in its order; raises `ValueError` naming
    the file when it has no id column. Canvas's "Points Possible" row is skipped."""
    with open(path, newline="", encoding="utf-8-sig") as file:
        rows = list(csv.DictReader(file))
    column = next((name for name in ID_COLUMNS if rows and name in rows[0]), None)
    if column is None:
        raise ValueError(f"{path}: no learner id column; expected one of {', '.join(ID_COLUMNS)}")
    learners = []
    for row in rows:
        if row.get(column, "").strip() and "Points Possible" not in row.get("Student", ""):
            learners.append({**row, "id": row[column].strip()})
    return learners


def read_overrides(path: Path) -> list[dict[str, str]]:
    """The instructor's manual scores; raises `ValueError` naming the file and the row."""
    with open(path, newline="", encoding="utf-8-sig") as file:
        rows = list(csv.DictReader(file))
    for number, row in enumerate(rows, start=2):
        missing = [name for name in OVERRIDE_COLUMNS if not (row.get(name) or "").strip()]
        if missing:
            raise ValueError(f"{path}:{number}: empty {', '.join(missing)}")
        try:
            int(row["todo"]), float(row["points"])
        except ValueError:
            raise ValueError(f"{path}:{number}: todo and points must be numbers") from None
    return rows


def names_lab(value: str, lab: str) -> bool:
    """Whether `value` names the lesson `lab`: its whole name, or its number (`01`)."""
    value = value.strip()
    return bool(value) and (lab == value or lab.startswith(f"{value}_"))


def due_dates(values: list[str], labs: dict) -> dict:
    """`--due LAB=WHEN` values as {lesson: datetime}; raises ValueError naming a bad one."""
    found = {}
    for value in values:
        lab, _, when = value.partition("=")
        names = [name for name in labs if names_lab(lab, name)]
        if len(names) != 1 or not when:
            raise ValueError(f"--due {value}: expected LAB=WHEN with LAB one of {sorted(labs)}")
        try:
            found[names[0]] = datetime.datetime.fromisoformat(when)
        except ValueError:
            raise ValueError(f"--due {value}: WHEN is not a date (2026-12-01T23:59)") from None
    return found


def submitted_at(path: Path, id_pattern: str | None) -> datetime.datetime:
    """When a file was handed in: the pattern's group `time` in its name, else its file time."""
    match = re.search(id_pattern, path.name) if id_pattern else None
    if match and match.groupdict().get("time"):
        return datetime.datetime.fromisoformat(match.group("time"))
    return datetime.datetime.fromtimestamp(path.stat().st_mtime)
