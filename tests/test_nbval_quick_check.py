"""The instructor's quick look (docs/grading.md): `pytest --nbval-lax` over a folder of
labs runs each in the learner's own kernel and reports every check cell as a test.

Formative, and forgeable (the checks run beside the learner's code); `tools.grade` gives
the marks. Run here on lab 1's solution and on the blank lab 1, with the lesson's small
parameters, in a folder of their own: the counts of passed and failed cells, and the
blank lab's first failure, its check's own message.
"""

import re
import subprocess
import sys

import nbformat
import pytest

from tests.test_grade import _notebook
from tools.building.lesson_parameters import SMALL_PARAMETERS

LAB1 = "01_tf_data_basics"


def _with_small_parameters(notebook):
    """The notebook with the lesson's small parameters set in its parameters cell, as the
    grader sets them (the lab's defaults are the full lesson)."""
    cell = next(c for c in notebook.cells if "parameters" in c.metadata.get("tags", []))
    cell.source += "".join(
        f"\n{name} = {value!r}" for name, value in SMALL_PARAMETERS[LAB1].items()
    )
    return notebook


@pytest.fixture(scope="module")
def nbval_run(tmp_path_factory):
    """pytest --nbval-lax over a folder holding lab 1's solution and the blank lab 1."""
    folder = tmp_path_factory.mktemp("submissions")
    for name, variant in (("ann.ipynb", "solutions"), ("bob.ipynb", "labs")):
        nbformat.write(_with_small_parameters(_notebook(variant, LAB1)), folder / name)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-rf",
        "--nbval-lax",
        "--nbval-current-env",
        "--nbval-cell-timeout",
        "300",
        str(folder),
    ]
    run = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=900)
    return run.stdout


def _failed(stdout: str, name: str) -> int:
    """The cells of one notebook that failed, from pytest's short summary (`-rf`)."""
    return len(re.findall(rf"^FAILED {re.escape(name)}::Cell \d+ ", stdout, re.MULTILINE))


def _code_cells(variant: str) -> int:
    return sum(cell.cell_type == "code" for cell in _notebook(variant, LAB1).cells)


def test_nbval_lax_reports_each_cell_solution_passing_blank_lab_failing(nbval_run):
    """The solution: every code cell passes. The blank lab (two hand-in cells more): its
    three check cells fail, the cells that use what the TODOs make, and the hand-in cell."""
    found = re.search(r"(\d+) failed, (\d+) passed", nbval_run)
    assert found, nbval_run[-3000:]
    failed, passed = int(found.group(1)), int(found.group(2))
    assert (_failed(nbval_run, "ann.ipynb"), _failed(nbval_run, "bob.ipynb")) == (0, 8)
    assert (failed, passed) == (8, _code_cells("solutions") + _code_cells("labs") - 8)
    assert (_code_cells("solutions"), _code_cells("labs")) == (16, 18)
    assert (  # Each check cell's failure is its check's plain message.
        "CheckFailed: TODO 1 (filenames): not done yet: filenames is still ... (Ellipsis). "
        "Expected a tf.data.Dataset of 100 file paths." in nbval_run
    )
