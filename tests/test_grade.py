"""Tests of tools/grade.py: one grading run over good, stub and bad submissions."""

import copy
import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tools import build_notebooks as build
from tools import grade, sandbox
from tools.lesson_parameters import missing_modules

KEY = build.METADATA_KEY
# An optional lesson whose modules are not installed (Beam for lesson 6) is not graded here.
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
TOKEN = "linger-tpu-speed-grade-test"  # In the command line of the processes left running.
CHEAT = """filenames = ...
import importlib
importlib.reload = lambda module, *args: module
import utils.checks
import utils.checks.tf_data_basics
utils.checks.tf_data_basics.check_filenames = lambda *a, **k: print("TODO 1 passed: trust me")
utils.checks.check_filenames = utils.checks.tf_data_basics.check_filenames
checks = utils.checks
"""
# TODO 2 answers 0 for every path; the patched reference makes every expected label 0 too.
PATCH_REFERENCE = """import utils.checks.tf_data_basics
utils.checks.tf_data_basics._folder_of = lambda path: "daisy"


def label_from_path(path):
    # TODO 2: return the index of the parent folder's name.
    return tf.constant(0, tf.int64)
"""
# Appended to TODO 1 of a solution: every attack is tried; `filenames` survives only if the
# memory limit stopped the allocation.
ATTACK = """
import os, subprocess
import numpy as np
for _path in {targets!r}:
    try:
        with open(_path, "a") as _file:
            _file.write("\\ncheck_filenames = lambda *args, **kwargs: None\\n")
        print("wrote", _path)
    except OSError as _error:
        print("refused:", _error)
os.makedirs(os.path.expanduser("~/.ipython/profile_default/startup"), exist_ok=True)
open(os.path.expanduser("~/.ipython/profile_default/startup/00-x.py"), "w").write("x = 1")
open("/tmp/shared-by-x.txt", "w").write("from another submission")
open("leak.txt", "w").write("from another submission")
subprocess.Popen(["sh", "-c", "sleep 300; : {token}"], start_new_session=True)
subprocess.Popen(["sh", "-c", "(sleep 300; : {token}) &"])
try:
    hog = np.zeros(9 * 10**9, dtype=np.uint8)
except MemoryError:
    hog = None
if hog is not None:
    filenames = "9 GB allocated"
"""
VICTIM = """
import os
for _path in ["leak.txt", "/tmp/shared-by-x.txt", "~/.ipython/profile_default/startup/00-x.py"]:
    assert not os.path.exists(os.path.expanduser(_path)), "a file from another submission"
"""
HELPER = """def folder_name(path):
    return tf.strings.split(path, "/")[-2]
"""
USES_HELPER = """def label_from_path(path):
    # TODO 2: return the index of the parent folder's name.
    return tf.argmax(tf.cast(class_names == folder_name(path), tf.int32))
"""


def _cell_index(notebook, **marks):
    return next(i for i, c in enumerate(notebook.cells) if c.metadata.get(KEY) == marks)


def _edited(solution, lab):
    """Scratch cells, a helper used by TODO 2, TODO 1 re-typed, TODO 3 duplicated (draft first)."""
    notebook = copy.deepcopy(solution)
    todo1 = _cell_index(notebook, todo=1)
    notebook.cells[todo1] = nbformat.v4.new_code_cell(notebook.cells[todo1].source)
    check1 = _cell_index(notebook, check=1)
    notebook.cells.insert(check1 + 1, nbformat.v4.new_markdown_cell("My notes"))
    notebook.cells.insert(check1 + 2, nbformat.v4.new_code_cell("print('scratch')"))
    todo2 = _cell_index(notebook, todo=2)
    notebook.cells[todo2].source = USES_HELPER
    notebook.cells.insert(todo2, nbformat.v4.new_code_cell(HELPER))
    draft = copy.deepcopy(lab.cells[_cell_index(lab, todo=3)])
    draft.id = "a-draft"
    notebook.cells.insert(_cell_index(notebook, todo=3), draft)
    return notebook


def _processes_with(token):
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if token.encode() in cmdline.read_bytes():
                found.append(cmdline.parent.name)
        except OSError:
            pass
    return found


def _git_status():
    return subprocess.run(["git", "status", "--porcelain"], cwd=REPO_ROOT, capture_output=True,
                          text=True, check=True).stdout  # fmt: skip


needs_bwrap = pytest.mark.skipif(
    sandbox.find_bwrap() is None,
    reason="bwrap is missing or cannot make user namespaces here (apt-get install bubblewrap)",
)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions")
    for lesson in LESSONS:
        nbformat.write(_notebook("solutions", lesson), folder / f"{lesson}-solution.ipynb")
        nbformat.write(_notebook("labs", lesson), folder / f"{lesson}-lab.ipynb")
    solution, lab = _notebook("solutions", LAB1), _notebook("labs", LAB1)
    (folder / "x-broken.ipynb").write_text('{"cells": [ not json')
    other = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Homework 7")])
    nbformat.write(other, folder / "x-other-course.ipynb")
    loop = _with_todo(solution, 2, lambda source: "while True:\n    pass\n" + source)
    nbformat.write(loop, folder / "x-infinite-loop.ipynb")
    cheat = _without_checks(_with_todo(lab, 1, lambda source: CHEAT))
    nbformat.write(cheat, folder / "x-cheat.ipynb")
    nbformat.write(_with_todo(solution, 2, lambda s: PATCH_REFERENCE), folder / "x-patch.ipynb")
    output_dir = tmp_path_factory.mktemp("grades")
    targets = [str(REPO_ROOT / "utils/checks/tf_data_basics.py"), str(REPO_ROOT / "tools/grade.py"),
               str(REPO_ROOT / "utils/new_module.py"), str(Path(sys.prefix) / "pyvenv.cfg"),
               str(folder / "y-victim.ipynb"), str(output_dir / "scores.md")]  # fmt: skip
    attack = ATTACK.format(targets=targets, token=TOKEN)
    if sandbox.find_bwrap():  # Unsandboxed, it would really write into the course.
        nbformat.write(_with_todo(solution, 1, lambda s: s + attack), folder / "x-attack.ipynb")
    nbformat.write(_with_todo(solution, 3, lambda s: "import os\nos._exit(1)\n" + s),
                   folder / "x-kernel-crash.ipynb")  # fmt: skip
    nbformat.write(_edited(solution, lab), folder / "x-edited.ipynb")
    name_error = _with_todo(solution, 2, lambda s: USES_HELPER)
    nbformat.write(name_error, folder / "x-name-error.ipynb")
    nbformat.write(_with_todo(solution, 1, lambda s: s + VICTIM), folder / "y-victim.ipynb")
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    git_before, venv_before = _git_status(), (Path(sys.prefix) / "pyvenv.cfg").read_bytes()
    status = grade.main([str(folder), "--output-dir", str(output_dir), "--cell-timeout", "45",
                         "--timeout", "600", "-j", "2"])  # fmt: skip
    with open(output_dir / "scores.csv") as file:
        rows = {row["submission"]: row for row in csv.DictReader(file)}
    after = {path.name: path.read_bytes() for path in folder.iterdir()}
    untouched = (
        after == before,
        (git_before, _git_status()),
        (Path(sys.prefix) / "pyvenv.cfg").read_bytes() == venv_before,
    )
    return status, rows, output_dir, untouched


def _todo_count(lesson):
    lab = _notebook("labs", lesson)
    return sum("todo" in cell.metadata.get(KEY, {}) for cell in lab.cells)


def _marks(row, count=4):
    return [row[f"TODO {n}"] for n in range(1, count + 1)]


def _lesson_marks(lesson, mark):
    """A lesson's marks in the table: `mark` for each of its TODOs, "" for the columns after."""
    return [mark] * _todo_count(lesson) + [""] * (4 - _todo_count(lesson))


def test_grading_works_and_writes_both_reports(graded):
    status, rows, output_dir, _ = graded
    assert status == 0
    assert len(rows) == 2 * len(LESSONS) + 9 + bool(sandbox.find_bwrap())
    assert (output_dir / "scores.md").read_text().startswith("Sandbox: ")
    assert (output_dir / f"{LAB1}-solution.junit.xml").exists()


def test_the_whole_score_table(graded):
    rows = graded[1]
    table = {name: (_marks(row), row["total"], row["flags"]) for name, row in rows.items()}
    expected = {
        **{
            f"{lesson}-solution.ipynb": (
                _lesson_marks(lesson, "pass"),
                str(_todo_count(lesson)),
                "",
            )
            for lesson in LESSONS
        },
        **{f"{lesson}-lab.ipynb": (_lesson_marks(lesson, "fail"), "0", "") for lesson in LESSONS},
        "x-broken.ipynb": ([""] * 4, "0", ""),
        "x-other-course.ipynb": ([""] * 4, "0", ""),
        "x-cheat.ipynb": (["fail"] * 4, "0", "course modules; importlib"),
        "x-patch.ipynb": (["pass", "fail", "fail", "pass"], "2", "course modules"),
        "x-edited.ipynb": (["pass"] * 4, "4", ""),
        "x-name-error.ipynb": (["pass", "fail", "fail", "fail"], "1", ""),
        "x-infinite-loop.ipynb": (["pass", "fail", "fail", "fail"], "1", ""),
        "x-kernel-crash.ipynb": (["pass", "pass", "fail", "fail"], "2", ""),
        "y-victim.ipynb": (["pass"] * 4, "4", "paths outside the work folder"),
    }
    if sandbox.find_bwrap():
        expected["x-attack.ipynb"] = (
            ["pass"] * 4,
            "4",
            "paths outside the work folder; processes",
        )
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


def test_replaced_checks_and_a_replaced_reload_do_not_decide(graded):
    row = graded[1]["x-cheat.ipynb"]
    assert row["TODO 1"] == "fail"
    assert "TODO 1: TODO 1 (filenames): not done yet" in row["first errors"]


def test_a_patched_reference_is_restored_before_the_check(graded):
    row = graded[1]["x-patch.ipynb"]
    assert "TODO 2: TODO 2 (label_from_path): expected label " in row["first errors"]


def test_a_kernel_crash_fails_the_rest_of_that_submission_only(graded):
    row = graded[1]["x-kernel-crash.ipynb"]
    assert _marks(row) == ["pass", "pass", "fail", "fail"]
    assert graded[1]["y-victim.ipynb"]["total"] == "4"


def test_learners_cells_are_kept_and_the_last_copy_of_a_todo_is_graded(graded):
    row = graded[1]["x-edited.ipynb"]
    assert row["total"] == "4" and row["first errors"] == ""
    report = (graded[2] / "scores.md").read_text()
    assert "- x-edited.ipynb: TODO 3: 2 cells found; the last one was graded\n" in report


def test_the_innermost_error_line_is_reported(graded):
    errors = graded[1]["x-name-error.ipynb"]["first errors"]
    assert errors.startswith("TODO 2: NameError: name 'folder_name' is not defined; ")


@needs_bwrap
def test_a_hostile_submission_changes_nothing_outside_its_sandbox(graded):
    rows, output_dir, untouched = graded[1], graded[2], graded[3]
    assert rows["x-attack.ipynb"]["total"] == "4"  # Memory limit held; every write refused.
    submissions_kept, (git_before, git_after), venv_kept = untouched
    assert submissions_kept and venv_kept
    assert git_after == git_before  # Nothing in the course changed (empty in a clean checkout).
    assert rows["y-victim.ipynb"]["total"] == "4"  # No file of x-attack's reached it.
    assert rows[f"{LAB1}-lab.ipynb"]["total"] == "0"  # The checks on disk are intact.
    assert _processes_with(TOKEN) == []  # Nothing it started outlived it.
    report = (output_dir / "scores.md").read_text()
    assert (
        "| x-attack.ipynb | 01_tf_data_basics | graded | pass | pass | pass | pass | 4/4 | "
        in report
    )
    assert report.startswith("Sandbox: bwrap (read-only file system, ")
    assert (
        "- x-attack.ipynb: flagged for review (its code touches paths outside the work folder, "
        "processes); still graded\n" in report
    )


def test_the_readme_command_from_the_repository_root():
    """The README's Grading command, exactly as written, from the repository root."""
    readme = (REPO_ROOT / "README.md").read_text()
    command = re.search(r"^\.venv/bin/python -m tools\.grade .+$", readme, re.M).group(0)
    assert command == ".venv/bin/python -m tools.grade submissions/ --output-dir build/grades"
    submissions, output_dir = REPO_ROOT / "submissions", REPO_ROOT / "build" / "grades"
    assert not submissions.exists(), f"{submissions} exists: move it away to run this test"
    git_before = _git_status()
    submissions.mkdir()
    try:
        for folder in ("solutions", "labs"):
            nbformat.write(_notebook(folder, LAB1), submissions / f"{folder}.ipynb")
        arguments = command.split()[1:]
        result = subprocess.run([sys.executable, *arguments], cwd=REPO_ROOT, capture_output=True,
                                text=True, timeout=600)  # fmt: skip
        with open(output_dir / "scores.csv") as file:
            rows = {row["submission"]: row for row in csv.DictReader(file)}
    finally:
        for path in submissions.glob("*.ipynb"):
            path.unlink()
        submissions.rmdir()
    assert result.returncode == 0, result.stderr
    assert _marks(rows["solutions.ipynb"]) == ["pass"] * 4
    assert _marks(rows["labs.ipynb"]) == ["fail"] * 4
    assert rows["labs.ipynb"]["first errors"].startswith("TODO 1: TODO 1 (filenames): not done")
    assert re.search(r"^2 submissions in \d+ s with -j \d+: [\d.]+ s per submission$",
                     result.stdout, re.M)  # fmt: skip
    assert _git_status() == git_before


def test_an_output_folder_that_is_or_holds_the_submissions_is_refused(tmp_path, capsys):
    nbformat.write(_notebook("labs", LAB1), tmp_path / "a.ipynb")
    for output_dir in (tmp_path, tmp_path.parent):
        assert grade.main([str(tmp_path), "--output-dir", str(output_dir)]) == 2
        error = capsys.readouterr().err
        assert error == (
            f"error: --output-dir {output_dir} is or contains the submissions folder "
            f"{tmp_path}; choose another folder (nothing was changed)\n"
        )
    assert [path.name for path in tmp_path.iterdir()] == ["a.ipynb"]


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
            assert mine.source == grade.GUARD % {"utils": str(REPO_ROOT / "utils")} + theirs.source
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


def test_each_lab_header_says_what_is_graded():
    for source in build.lesson_sources(REPO_ROOT):
        lab, solution = build.split_variants(source)
        assert lab.cells[1].source.endswith(build.GRADED_NOTE), source.name
        assert build.GRADED_NOTE not in solution.cells[1].source


def test_restore_keeps_learner_cells_in_place_and_finds_retyped_todos():
    lab, solution = _notebook("labs", LAB1), _notebook("solutions", LAB1)
    restored, notes = grade.restore_protected_cells(_edited(solution, lab), lab)
    sources = [cell.source for cell in restored.cells]
    assert notes == ["TODO 3: 2 cells found; the last one was graded"]
    assert len(restored.cells) == len(lab.cells) + 3  # Notes, scratch cell, helper.
    check1 = sources.index(next(s for s in sources if "checks.check_filenames(" in s))
    assert sources[check1 + 1 : check1 + 3] == ["My notes", "print('scratch')"]
    todo2 = sources.index(USES_HELPER)
    assert sources[todo2 - 1] == HELPER
    assert sources.count(HELPER) == 1
    todo1 = next(c for c in restored.cells if c.metadata.get(KEY) == {"todo": 1})
    assert (
        todo1.source == next(c for c in solution.cells if c.metadata.get(KEY) == {"todo": 1}).source
    )
    assert grade.find_flags(grade.learner_code(_edited(solution, lab), lab)) == []


@pytest.mark.parametrize(
    "code, flags",
    [
        ("utils.checks.tf_data_basics.check_filenames = print", ["course modules"]),
        ("setattr(storage, 'read_file', f)", ["course modules"]),
        ("sys.modules['utils.checks'] = fake", ["sys.modules"]),
        ("import importlib", ["importlib"]),
        ("get_ipython().input_transformers_post.append(f)", ["IPython hooks"]),
        ("!ls", ["IPython hooks"]),
        ("open('/etc/passwd')", ["paths outside the work folder"]),
        ("open('../other.ipynb')", ["paths outside the work folder"]),
        ("import subprocess", ["processes"]),
        ("os.posix_spawn(path, args, env)", ["processes"]),
        ("folder = tf.strings.split(path, '/')[-2]\nsame = utils.data.CLASSES == names", []),
    ],
)
def test_flags_name_what_the_code_touches(code, flags):
    assert grade.find_flags(code) == flags


@pytest.mark.parametrize("lesson", LESSONS)
def test_solutions_raise_no_flags(lesson):
    labs = grade.load_labs()
    assert grade.find_flags(grade.learner_code(_notebook("solutions", lesson), labs[lesson])) == []


def test_without_bwrap_the_grader_says_not_isolated(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sandbox, "find_bwrap", lambda: None)
    (tmp_path / "submissions").mkdir()
    (tmp_path / "submissions" / "broken.ipynb").write_text("not json")
    arguments = [str(tmp_path / "submissions"), "--output-dir", str(tmp_path / "grades")]
    assert grade.main([*arguments, "--sandbox", "bwrap"]) == 2
    assert capsys.readouterr().err.startswith("error: --sandbox bwrap, but bwrap is missing")
    assert not (tmp_path / "grades").exists()
    (tmp_path / "grades").mkdir()
    (tmp_path / "grades" / "mine.txt").write_text("kept")
    assert grade.main(arguments) == 0
    assert capsys.readouterr().err.startswith("WARNING: NOT ISOLATED (no working bwrap here): ")
    report = (tmp_path / "grades" / "scores.md").read_text()
    assert report.startswith("Sandbox: NOT ISOLATED (no working bwrap here)\n")
    assert (tmp_path / "grades" / "mine.txt").read_text() == "kept"  # Not the grader's file.
