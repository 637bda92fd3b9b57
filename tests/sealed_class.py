"""One class graded once for the sealed-verdict tests of labs 2, 4, 5, 6, 7 and 9.

Each of those modules writes its submissions with `write_submissions(folder)`; the
`sealed_class` fixture (tests/conftest.py) puts them in one folder and grades it in one
run with fixed limits (the grader's start and its `-j 2` are shared, instead of three
runs), and each module reads back the rows of the files it wrote.
"""

import importlib
from dataclasses import dataclass
from pathlib import Path

from tests.test_grade import grade_with_fixed_limits

MODULES = (
    "tests.test_grading_sealed_lab5",
    "tests.test_grading_sealed_labs_2_9",
    "tests.test_grading_sealed_labs_4_6_7",
)


@dataclass
class GradedClass:
    """The run's exit status, grades.csv's rows by submission, scores.md, and who wrote what."""

    status: int
    rows: dict[str, dict]
    report: str
    written: dict[str, set[str]]

    def of(self, module: str) -> tuple[int, dict[str, dict], str]:
        """(status, the rows of the files `module` wrote, the whole scores.md)."""
        return self.status, {n: self.rows[n] for n in self.written[module]}, self.report


def grade(submissions: Path, output: Path) -> GradedClass:
    """Writes every module's submissions into `submissions`, then grades them into `output`."""
    written = {}
    for name in MODULES:
        before = {path.name for path in submissions.iterdir()}
        importlib.import_module(name).write_submissions(submissions)
        written[name] = {path.name for path in submissions.iterdir()} - before
        assert written[name], f"{name} wrote no submission"
    return GradedClass(*grade_with_fixed_limits(submissions, output), written)
