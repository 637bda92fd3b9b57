"""One mistake costs one TODO in the grader, a TODO cell that crashes or hangs included
(issue 61 item 4): after a failed verdict the lab's solution of that TODO runs in the
kernel in its place, so the later TODOs run on what the lab would have given them.
"""

import csv

import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tests.test_grade import _set_todo, needs_bwrap
from tools import grade
from tools.building.variants import split_variants
from tools.grading.judge.judge_output import Verdict
from tools.grading.model import KEY
from tools.grading.submission import run

CORE = ("01_tf_data_basics", "02_write_tfrecords", "03_read_tfrecords", "04_train_keras")
CORE += ("05_accelerator_waiting",)
CRASH = 'raise RuntimeError("a mistake in TODO 1")\n'
HANG = "while True:\n    pass\n"


class _Found:
    def __init__(self, found):
        self.found = found


def _prepared():
    todo = nbformat.v4.new_code_cell(id="todo-1")
    keep = nbformat.v4.new_code_cell(id="grader-keep-1")
    keep.metadata[KEY] = {"check": 1}
    return [(todo, "x = 1"), (keep, "keep")]


@pytest.mark.parametrize(
    ("status", "verdict", "expected"),
    [
        ("ok", Verdict(True, "TODO 1 passed"), ""),
        ("ok", Verdict(False, "TODO 1: wrong"), "# Grader: the lab's solution of TODO 1.\nx = 2"),
        (
            "error",
            Verdict(False, "TODO 1: missing"),
            "# Grader: the lab's solution of TODO 1.\nx = 2",
        ),
        ("error", None, "# Grader: the lab's solution of TODO 1.\nx = 2"),
        ("ok", None, ""),
    ],
)
def test_the_solution_stands_in_after_a_failed_verdict_only(status, verdict, expected, monkeypatch):
    monkeypatch.setattr(run, "VERDICT_WAIT_SECONDS", 0.1)
    found = {} if verdict is None else {1: verdict}
    stand_in = run.stand_in_code(_prepared(), {1: "x = 2"}, _Found(found))
    results = [run.grade_kernel.CellResult(status), run.grade_kernel.CellResult("ok")]
    assert stand_in(0, results[:1]) == ""  # Only after the keep cell: the TODO is judged.
    assert stand_in(1, results) == expected
    assert run.stand_in_code(_prepared(), {}, _Found(found))(1, results) == ""  # No solution.


def _solution(lesson):
    return split_variants(REPO_ROOT / "notebooks" / f"{lesson}.py")[1]


def _grade(folder, output, cell_timeout):
    status = grade.main(
        [str(folder), "--output-dir", str(output), "-j", "2"]
        + ["--cell-timeout", str(cell_timeout), "--timeout", "1200"]
    )
    with open(output / "grades.csv") as file:
        rows = {row["submission"]: row for row in csv.DictReader(file)}
    return status, rows, (output / "scores.md").read_text()


@pytest.fixture(scope="module")
def crashed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions")
    for lesson in CORE:
        nbformat.write(_set_todo(_solution(lesson), 1, CRASH), folder / f"crash_{lesson[:2]}.ipynb")
    return _grade(folder, tmp_path_factory.mktemp("grades"), 400)


@needs_bwrap
def test_a_crashing_todo_1_costs_todo_1_only_in_each_core_lab(crashed):
    status, rows, report = crashed
    assert status == 0
    found = {
        name: [row[f"TODO {n}"] for n in (1, 2, 3) if row.get(f"TODO {n}")]
        for name, row in rows.items()
    }
    assert found == {
        "crash_01.ipynb": ["0", "1", "1"],
        "crash_02.ipynb": ["0", "1"],
        "crash_03.ipynb": ["0", "1"],
        "crash_04.ipynb": ["0", "1"],
        "crash_05.ipynb": ["0", "1"],
    }
    assert (
        "- crash_01.ipynb, TODO 1: your TODO 1 cell failed: RuntimeError: a mistake in TODO 1\n"
        in report
    )


@pytest.fixture(scope="module")
def hung(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions")
    nbformat.write(_set_todo(_solution(CORE[0]), 1, HANG), folder / "hang_01.ipynb")
    return _grade(folder, tmp_path_factory.mktemp("grades"), 60)


@needs_bwrap
def test_a_todo_cell_past_its_limit_is_stopped_and_costs_its_todo_only(hung):
    status, rows, report = hung
    assert status == 0
    row = rows["hang_01.ipynb"]
    assert [row["TODO 1"], row["TODO 2"], row["TODO 3"]] == ["0", "1", "1"]
    assert (
        "hang_01.ipynb, TODO 1: your TODO 1 cell failed: ran past the cell's time limit (60 s)"
        in report
    )
