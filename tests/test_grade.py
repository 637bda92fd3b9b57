"""Tests of tools/grade.py: one grading run over good, stub and bad submissions."""

import copy
import csv
import json

import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tools import build_notebooks as build
from tools import grade
from tools.lesson_parameters import missing_modules

KEY = build.METADATA_KEY
# An optional lesson whose modules are not installed (Beam for lesson 5) is not graded here.
LESSONS = [
    path.stem
    for path in sorted((REPO_ROOT / "labs").glob("*.ipynb"))
    if not missing_modules(path.stem)
]


def _notebook(folder, lesson):
    return nbformat.read(REPO_ROOT / folder / f"{lesson}.ipynb", as_version=4)


def _with_todo(notebook, todo, source):
    notebook = copy.deepcopy(notebook)
    for cell in notebook.cells:
        if cell.metadata.get(KEY, {}).get("todo") == todo:
            cell.source = source(cell.source)
    return notebook


def _without_checks(notebook):
    notebook = copy.deepcopy(notebook)
    notebook.cells = [c for c in notebook.cells if "check" not in c.metadata.get(KEY, {})]
    return notebook


LAB1 = "01_tf_data_basics"
CHEAT = """filenames = ...
import utils.checks
import utils.checks.reading
utils.checks.reading.check_filenames = lambda *args, **kwargs: print("TODO 1 passed: trust me")
utils.checks.check_filenames = utils.checks.reading.check_filenames
checks = utils.checks
"""
ESCAPE = """
import os
open("leak.txt", "w").write("from another submission")
open(os.path.expanduser("~/leak.txt"), "w").write("from another submission")
"""
VICTIM = """
import os
assert not os.path.exists("leak.txt"), "a file from another submission"
assert not os.path.exists(os.path.expanduser("~/leak.txt")), "a file from another submission"
"""


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions")
    for lesson in LESSONS:
        nbformat.write(_notebook("solutions", lesson), folder / f"{lesson}-solution.ipynb")
        nbformat.write(_notebook("labs", lesson), folder / f"{lesson}-lab.ipynb")
    solution = _notebook("solutions", LAB1)
    (folder / "x-broken.ipynb").write_text('{"cells": [ not json')
    other = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Homework 7")])
    nbformat.write(other, folder / "x-other-course.ipynb")
    loop = _with_todo(solution, 2, lambda source: "while True:\n    pass\n" + source)
    nbformat.write(loop, folder / "x-infinite-loop.ipynb")
    cheat = _without_checks(_with_todo(_notebook("labs", LAB1), 1, lambda source: CHEAT))
    nbformat.write(cheat, folder / "x-cheat.ipynb")
    nbformat.write(_with_todo(solution, 1, lambda s: s + ESCAPE), folder / "x-escape.ipynb")
    nbformat.write(_with_todo(solution, 3, lambda s: "import os\nos._exit(1)\n" + s),
                   folder / "x-kernel-crash.ipynb")  # fmt: skip
    nbformat.write(_with_todo(solution, 1, lambda s: s + VICTIM), folder / "y-victim.ipynb")
    output_dir = tmp_path_factory.mktemp("grades")
    status = grade.main([str(folder), "--output-dir", str(output_dir), "--cell-timeout", "45",
                         "--timeout", "600"])  # fmt: skip
    with open(output_dir / "scores.csv") as file:
        rows = {row["submission"]: row for row in csv.DictReader(file)}
    return status, rows, output_dir


def _todo_count(lesson):
    lab = _notebook("labs", lesson)
    return sum("todo" in cell.metadata.get(KEY, {}) for cell in lab.cells)


def _marks(row, count=4):
    return [row[f"TODO {n}"] for n in range(1, count + 1)]


def _lesson_marks(lesson, mark):
    """A lesson's marks in the table: `mark` for each of its TODOs, "" for the columns after."""
    return [mark] * _todo_count(lesson) + [""] * (4 - _todo_count(lesson))


def test_grading_works_and_writes_both_reports(graded):
    status, rows, output_dir = graded
    assert status == 0
    assert len(rows) == 2 * len(LESSONS) + 7
    assert (output_dir / "scores.md").read_text().startswith("| submission | lab | status |")
    assert (output_dir / f"{LAB1}-solution.junit.xml").exists()


def test_the_whole_score_table(graded):
    rows = graded[1]
    table = {name: (_marks(row), row["total"]) for name, row in rows.items()}
    expected = {
        **{
            f"{lesson}-solution.ipynb": (_lesson_marks(lesson, "pass"), str(_todo_count(lesson)))
            for lesson in LESSONS
        },
        **{f"{lesson}-lab.ipynb": (_lesson_marks(lesson, "fail"), "0") for lesson in LESSONS},
        "x-broken.ipynb": ([""] * 4, "0"),
        "x-other-course.ipynb": ([""] * 4, "0"),
        "x-cheat.ipynb": (["fail"] * 4, "0"),
        "x-escape.ipynb": (["pass"] * 4, "4"),
        "x-infinite-loop.ipynb": (["pass", "fail", "fail", "fail"], "1"),
        "x-kernel-crash.ipynb": (["pass", "pass", "fail", "fail"], "2"),
        "y-victim.ipynb": (["pass"] * 4, "4"),
    }
    assert table == expected


@pytest.mark.parametrize("lesson", LESSONS)
def test_solutions_get_full_marks(graded, lesson):
    row = graded[1][f"{lesson}-solution.ipynb"]
    assert row["lab"] == lesson and row["status"] == "graded"
    assert _marks(row) == _lesson_marks(lesson, "pass")
    assert row["total"] == str(_todo_count(lesson))
    assert row["first errors"] == ""


@pytest.mark.parametrize("lesson", LESSONS)
def test_labs_as_generated_fail_every_todo_with_messages(graded, lesson):
    row = graded[1][f"{lesson}-lab.ipynb"]
    assert _marks(row) == _lesson_marks(lesson, "fail") and row["total"] == "0"
    assert row["first errors"].startswith("TODO 1: TODO 1 (")
    assert "not done yet" in row["first errors"]
    assert all(f"TODO {n}: " in row["first errors"] for n in range(1, _todo_count(lesson) + 1))


def test_unreadable_and_unknown_notebooks_are_reported_not_graded(graded):
    rows = graded[1]
    assert rows["x-broken.ipynb"]["status"].startswith("unreadable: ")
    assert rows["x-other-course.ipynb"]["status"].startswith("unknown lab")
    assert rows["x-broken.ipynb"]["total"] == rows["x-other-course.ipynb"]["total"] == "0"


def test_an_infinite_loop_times_out_that_cell_and_the_rest_is_graded(graded):
    row = graded[1]["x-infinite-loop.ipynb"]
    assert row["TODO 1"] == "pass" and row["TODO 2"] == "fail"
    assert "TODO 2: " in row["first errors"]
    assert "imeout" in row["first errors"] or "timed out" in row["first errors"]
    assert graded[1]["y-victim.ipynb"]["total"] == "4"  # Graded after it, as usual.


def test_deleted_or_redefined_checks_do_not_decide(graded):
    row = graded[1]["x-cheat.ipynb"]
    assert row["TODO 1"] == "fail"
    assert "TODO 1: TODO 1 (filenames): not done yet" in row["first errors"]


def test_a_kernel_crash_fails_the_rest_of_that_submission_only(graded):
    row = graded[1]["x-kernel-crash.ipynb"]
    assert _marks(row) == ["pass", "pass", "fail", "fail"]
    assert graded[1]["y-victim.ipynb"]["total"] == "4"


def test_files_written_by_one_submission_do_not_reach_the_next(graded):
    assert graded[1]["x-escape.ipynb"]["total"] == "4"
    assert graded[1]["y-victim.ipynb"]["total"] == "4"


def test_identify_lab_by_metadata_or_title():
    labs = grade.load_labs()
    lab = _notebook("labs", LAB1)
    assert grade.identify_lab(lab, labs) == LAB1
    lab.metadata = {}
    assert grade.identify_lab(lab, labs) == LAB1  # From the "Lab 1" title.
    lab.cells[0].source = "# Lab 9 · Not a lab of this course"
    assert grade.identify_lab(lab, labs) is None
    for lesson in LESSONS:  # "Lab N" and "Lesson N" titles.
        notebook = _notebook("labs", lesson)
        notebook.metadata = {}
        assert grade.identify_lab(notebook, labs) == lesson


def test_restore_takes_only_todo_cells_from_the_submission():
    lab = _notebook("labs", LAB1)
    submission = copy.deepcopy(_notebook("solutions", LAB1))
    submission.cells[2].source = "print('an edited set-up cell')"
    restored, notes = grade.restore_protected_cells(_without_checks(submission), lab)
    assert notes == []
    for mine, theirs in zip(restored.cells, lab.cells, strict=True):
        marks = theirs.metadata.get(KEY, {})
        if "todo" in marks:
            assert mine.source != theirs.source  # The solution's code, not the stub.
        elif "check" in marks:
            assert mine.source == grade.RELOAD_CHECKS + theirs.source
        else:
            assert mine.source == theirs.source
    restored, notes = grade.restore_protected_cells(nbformat.v4.new_notebook(), lab)
    assert notes == [f"TODO {n}: no cell found in the submission" for n in (1, 2, 3, 4)]


def test_main_refuses_a_folder_without_notebooks(tmp_path, capsys):
    assert grade.main([str(tmp_path)]) == 2
    assert "no .ipynb files" in capsys.readouterr().err
    assert grade.main([str(tmp_path / "missing")]) == 2


def test_inject_parameters_adds_a_cell_after_the_parameters_cell():
    lab = _notebook("labs", LAB1)
    injected = grade.inject_parameters(lab, {"NUM_IMAGES": 7})
    index = next(
        i for i, c in enumerate(injected.cells) if "parameters" in c.metadata.get("tags", [])
    )
    assert injected.cells[index + 1].source.endswith("NUM_IMAGES = 7")
    assert json.dumps(lab) != json.dumps(injected) and len(injected.cells) == len(lab.cells) + 1
