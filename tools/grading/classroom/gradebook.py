"""A class's gradebook: the roster, one submission per learner and lab, late work, manual
scores.

Takes the `Grade`s of a grading run and the instructor's own files: a roster (the LMS's
gradebook export, or any CSV with an id column), due dates with a late rule, and an
override file; gives the `Grade`s of the gradebook: one per roster learner and lab
(`missing` where nothing came), the latest submission of each learner and lab kept and the
others set aside, each late one's penalty, each override applied with its reason. The
LMS's import files are written by `lms_files.py`.
"""

from __future__ import annotations

import dataclasses
import datetime
import math

from tools.grading.classroom.class_files import names_lab
from tools.grading.model import Grade


@dataclasses.dataclass(kw_only=True)
class LateRule:
    """Penalty per day late (a started day counts), in percent of the points, up to a cap."""

    percent_per_day: float = 10.0
    cap_percent: float = 50.0

    def penalty(self, days: int) -> float:
        return min(self.cap_percent, self.percent_per_day * max(days, 0))


def keep_latest(grades: list[Grade]) -> list[Grade]:
    """One submission per learner and lab: the latest; the others' status says which won."""
    latest: dict[tuple[str, str], Grade] = {}
    for grade in grades:
        if grade.lab and grade.submitted is not None:
            key = (grade.learner, grade.lab)
            if key not in latest or grade.submitted > latest[key].submitted:
                latest[key] = grade
    for grade in grades:
        winner = latest.get((grade.learner, grade.lab))
        if winner is not None and winner is not grade:
            grade.status = f"set aside: {winner.submission} is later"
    return grades


def apply_late_rule(grade: Grade, due: datetime.datetime | None, rule: LateRule) -> None:
    """Sets the days late and the penalty of a graded submission."""
    if due is None or grade.submitted is None or grade.submitted <= due:
        return
    grade.late_days = math.ceil((grade.submitted - due).total_seconds() / 86400)
    grade.penalty_percent = rule.penalty(grade.late_days)


def apply_overrides(grade: Grade, overrides: list[dict[str, str]]) -> None:
    """Replaces the points of each TODO the instructor decided, keeping the reason."""
    for row in overrides:
        if row["learner"].strip() == grade.learner and names_lab(row["lab"], grade.lab):
            todo, points = int(row["todo"]), float(row["points"])
            grade.overridden[todo] = (points, row["reason"].strip())


def gradebook(
    grades: list[Grade],
    *,
    roster: list[dict[str, str]] | None,
    due: dict,
    rule: LateRule,
    overrides: list[dict[str, str]],
    points: dict,
) -> list[Grade]:
    """The gradebook's rows: the graded submissions, then a `missing` row per roster learner
    and lab with none (the labs are those `due` names, else those any submission is for)."""
    grades = keep_latest(grades)
    for grade in grades:
        if grade.status == "graded":
            apply_late_rule(grade, due.get(grade.lab), rule)
            apply_overrides(grade, overrides)
    if roster is not None:
        labs = sorted(due) or sorted({grade.lab for grade in grades if grade.lab})
        handed_in = {(grade.learner, grade.lab) for grade in grades}
        for learner in roster:
            for lab in labs:
                if (learner["id"], lab) not in handed_in:
                    missing = Grade(
                        submission="",
                        learner=learner["id"],
                        lab=lab,
                        status="missing",
                        points=dict(points.get(lab, {})),
                    )
                    grades.append(missing)
    return grades
