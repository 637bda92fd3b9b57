"""Tests of the hand-in cells: tools/grading/hand_in_code.py, as the build puts it in every lab.

The code runs in the learner's kernel: the checks again ("N of M TODOs pass"), and a copy
of the saved notebook named as the grader's `--id-pattern` reads it. The build makes the
cells from each lab's own check cells; the grader skips them.
"""

import ast
import copy
import json
import os
import sys

import nbclient
import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tests.test_build_notebooks import EXECUTABLE_LESSON, _lesson_root
from tools import build_notebooks as build
from tools.building.hand_in import HAND_IN_CODE, HAND_IN_CODE_HEADER, HAND_IN_TAG
from tools.building.kernels import UnixSocketKernelManager
from tools.building.outputs import METADATA_KEY
from tools.building.regions import BuildError
from tools.building.variants import split_variants
from tools.grading import hand_in_code
from tools.grading.submission.identify import learner_id
from tools.grading.submission.prepare import judged_cells
from tools.grading.submission.restore import restore_protected_cells
from utils.checks import check_filenames

KEY = METADATA_KEY
LAB = "01_tf_data_basics"
ID_PATTERN = r"^(?P<id>[^_]+)_"  # docs/grading.md's example for the hand-in copies.
SOURCES = build.lesson_sources(REPO_ROOT)


def _raise(error):
    raise error


def _saved_lab(folder, lab=LAB, name=None):
    """A notebook file as a front end saves it: course metadata, a cell with an output."""
    notebook = nbformat.v4.new_notebook(metadata={KEY: {"source": f"notebooks/{lab}.py"}})
    cell = nbformat.v4.new_code_cell("filenames = 1", id="todo-1")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="done\n")]
    notebook.cells = [cell]
    path = folder / (name or f"{lab}.ipynb")
    nbformat.write(notebook, path)
    return path


def test_run_checks_counts_and_prints_each_failing_todos_line(capsys):
    checks = {
        1: lambda: print("TODO 1 passed: 3 files."),
        2: lambda: check_filenames(..., todo=2, expected_count=3, class_names=["a"]),
        3: lambda: sample_paths,  # noqa: F821  (a cell above not run)
        4: lambda: _raise(ValueError("shapes (2,) and (3,) differ\nmore")),
        5: lambda: None,
    }
    found = hand_in_code.run_checks(checks)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "2 of 5 TODOs pass: 1, 5."
    assert out[1] == (
        "TODO 2 (filenames): not done yet: filenames is still ... (Ellipsis). "
        "Expected a tf.data.Dataset of 3 file paths."
    )
    assert out[2].startswith(
        "TODO 3: not checked: name 'sample_paths' is not defined: a cell above has not run"
    )
    assert out[3] == "TODO 4: ValueError: shapes (2,) and (3,) differ"
    assert len(out) == 4  # The checks' own lines are not shown again.
    assert found == {1: None, 2: out[1], 3: out[2], 4: out[3], 5: None}


def test_run_checks_with_none_passing_says_0_of_m(capsys):
    hand_in_code.run_checks({1: lambda: _raise(KeyError("image"))})
    assert capsys.readouterr().out == "0 of 1 TODOs pass.\nTODO 1: KeyError: 'image'\n"


@pytest.mark.parametrize("bad", ["kim_lee", "kim lee", ".kim", "", "kim/1", "émile"])
def test_copy_name_refuses_an_id_that_cannot_name_the_file(bad):
    with pytest.raises(hand_in_code.HandInError, match=rf"^LEARNER_ID = {bad!r} cannot name"):
        hand_in_code.copy_name(bad, LAB)


@pytest.mark.parametrize("good", ["kim42", "s-1234", "kim.lee@school.edu", "7"])
def test_the_copys_name_gives_the_grader_the_id_with_or_without_a_pattern(tmp_path, good):
    name = hand_in_code.copy_name(good, LAB)
    assert name == f"{good}_{LAB}.ipynb"
    hand_in_code.save_copy(_saved_lab(tmp_path), good, LAB)
    copy_path = tmp_path / name
    assert learner_id(copy_path, ID_PATTERN) == good
    assert learner_id(copy_path, None) == good  # From the copy's name, as the hand-in made it.


def test_save_copy_copies_the_saved_file_with_the_id_in_its_metadata(tmp_path):
    original = _saved_lab(tmp_path)
    before = original.read_bytes()
    said = hand_in_code.save_copy(original, "kim42", LAB)
    target = tmp_path / f"kim42_{LAB}.ipynb"
    assert said.startswith(f"Wrote {target}: this notebook as it was last saved, at ")
    assert "what you changed after that is not in it" in said
    assert "replaced" not in said
    assert original.read_bytes() == before
    saved, copied = json.loads(before), json.loads(target.read_text())
    assert copied["metadata"][KEY].pop("learner") == "kim42"
    assert copied == saved  # Outputs and all, as saved.


def test_save_copy_replaces_only_an_earlier_copy_of_the_same_learner(tmp_path):
    original = _saved_lab(tmp_path)
    target = tmp_path / f"kim42_{LAB}.ipynb"
    hand_in_code.save_copy(original, "kim42", LAB)
    nbformat.write(nbformat.v4.new_notebook(metadata=nbformat.read(original, 4).metadata), original)
    said = hand_in_code.save_copy(original, "kim42", LAB)
    assert "It replaced your earlier copy." in said
    assert json.loads(target.read_text())["cells"] == []
    # Another learner's copy, a notebook of the learner's own, a file that is no notebook:
    for mine in ('{"metadata": {"tpu_speed_pipelines": {"learner": "ann"}}}', "{}", "notes"):
        target.write_text(mine)
        said = hand_in_code.save_copy(original, "kim42", LAB)
        assert said == (
            f"Not copied: {target} exists and is not an earlier copy of yours; it was left "
            "as it is. Rename or move it, then run this cell again."
        )
        assert target.read_text() == mine
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{LAB}.ipynb", target.name]


def test_save_copy_of_another_lab_or_of_itself_writes_nothing(tmp_path):
    other = _saved_lab(tmp_path, "03_read_tfrecords")
    assert hand_in_code.save_copy(other, "kim42", LAB) == (
        f"Not copied: {other} is not lab {LAB}'s notebook. Save this lab, then retry."
    )
    named = _saved_lab(tmp_path, name=f"kim42_{LAB}.ipynb")
    before = named.read_bytes()
    assert hand_in_code.save_copy(named, "kim42", LAB) == (
        f"This notebook is named kim42_{LAB}.ipynb already: save it (Ctrl+S) and hand in that file."
    )
    assert named.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([other.name, named.name])


def test_notebook_path_from_vs_code_jupyterlab_or_nowhere(tmp_path, monkeypatch):
    saved = _saved_lab(tmp_path)
    monkeypatch.chdir(tmp_path)  # A kernel runs in its notebook's folder.
    assert hand_in_code.notebook_path({"__vsc_ipynb_file__": str(saved)}, {}) == saved
    # JupyterLab 4: absolute, or from the server's root (found by its name here).
    assert hand_in_code.notebook_path({"__session__": f"course/labs/{LAB}.ipynb"}, {}) == saved
    assert hand_in_code.notebook_path({}, {"JPY_SESSION_NAME": str(saved)}) == saved
    assert hand_in_code.notebook_path({"__session__": "console-1"}, {}) is None
    assert hand_in_code.notebook_path({"__session__": "gone.ipynb"}, {}) is None
    assert hand_in_code.notebook_path({}, {}) is None


def test_hand_in_without_an_id_runs_the_checks_and_writes_nothing(tmp_path, capsys):
    saved = _saved_lab(tmp_path)
    found = hand_in_code.hand_in(
        {1: lambda: None}, lab=LAB, learner_id="", namespace={"__vsc_ipynb_file__": str(saved)}
    )
    assert found is None  # A cell shows no value.
    out = capsys.readouterr().out
    assert out.startswith("1 of 1 TODOs pass: 1.\n\nTo hand in: set LEARNER_ID = ")
    assert f"it makes the copy to hand in, named <your id>_{LAB}.ipynb.\n" in out
    assert [p.name for p in tmp_path.iterdir()] == [saved.name]


def test_hand_in_on_colab_or_an_unknown_front_end_says_how(tmp_path, capsys, monkeypatch):
    saved = _saved_lab(tmp_path)
    namespace = {"__vsc_ipynb_file__": str(saved)}
    monkeypatch.setitem(sys.modules, "google.colab", object())
    hand_in_code.hand_in({}, lab=LAB, learner_id="kim42", namespace=namespace)
    assert capsys.readouterr().out.splitlines()[-1] == (
        "On Colab the notebook is in Drive, not on this machine: File > Save, then File > "
        f"Download > Download .ipynb, name the file kim42_{LAB}.ipynb and hand in that file."
    )
    monkeypatch.delitem(sys.modules, "google.colab")
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    hand_in_code.hand_in({}, lab=LAB, learner_id="kim42", namespace={})
    out = capsys.readouterr().out
    assert out.startswith("0 of 0 TODOs pass.\n")
    assert f"download or copy it as kim42_{LAB}.ipynb, hand in that file." in out
    assert [p.name for p in tmp_path.iterdir()] == [saved.name]


def test_hand_in_with_a_bad_id_fails_before_running_any_check():
    ran = []
    with pytest.raises(hand_in_code.HandInError, match="LEARNER_ID = 'kim lee'"):
        hand_in_code.hand_in(
            {1: lambda: ran.append(1)}, lab=LAB, learner_id="kim lee", namespace={}
        )
    assert ran == []


def _filled(lab, solution):
    """The lab with every TODO cell as the solution has it: what a learner hands in."""
    filled, sources = copy.deepcopy(lab), {c.id: c.source for c in solution.cells}
    for cell in filled.cells:
        if "todo" in cell.metadata.get(KEY, {}):
            cell.source = sources[cell.id]
    return filled


def _check_call(cell):
    """The `checks.check_...(...)` call of a lab's check cell, as a syntax tree."""
    calls = [s.value for s in ast.parse(cell.source).body if isinstance(s, ast.Expr)]
    return ast.dump(next(c for c in calls if ast.unparse(c.func).startswith("checks.check_")))


@pytest.mark.parametrize("source", SOURCES, ids=[p.stem for p in SOURCES])
def test_every_lab_ends_with_the_hand_in_cells_calling_each_todos_check(source):
    lab, solution = split_variants(source)
    text, call = lab.cells[-2:]
    assert [c.id for c in lab.cells[-2:]] == ["hand-in-text", "hand-in"]
    # Its code right after the set-up cell: "Run all" defines it before a check can fail.
    tags = [c.metadata.get("tags", []) for c in lab.cells]
    code = lab.cells[tags.index(["setup", "nbval-ignore-output"]) + 1]
    assert code.id == "hand-in-code"
    hand_in_cells = [c.id for c, t in zip(lab.cells, tags, strict=True) if HAND_IN_TAG in t]
    assert hand_in_cells == ["hand-in-code", "hand-in-text", "hand-in"]
    assert f"`<your id>_{source.stem}.ipynb`" in text.source
    assert code.source == HAND_IN_CODE_HEADER + HAND_IN_CODE.read_text().rstrip()
    assert code.metadata["jupyter"] == {"source_hidden": True}  # As the set-up cell.
    (statement,) = [s for s in ast.parse(call.source).body if isinstance(s, ast.Expr)]
    assert ast.unparse(statement.value.func) == "hand_in"
    keywords = {k.arg: ast.unparse(k.value) for k in statement.value.keywords}
    assert keywords == {
        "lab": repr(source.stem),
        "learner_id": "LEARNER_ID",
        "namespace": "globals()",
    }
    listed = statement.value.args[0]
    todos = [c.metadata[KEY]["todo"] for c in lab.cells if "todo" in c.metadata.get(KEY, {})]
    assert [key.value for key in listed.keys] == todos
    checks = {c.metadata[KEY]["check"]: c for c in lab.cells if "check" in c.metadata.get(KEY, {})}
    assert [ast.dump(value.body) for value in listed.values] == [
        _check_call(checks[todo]) for todo in todos
    ]
    # The lab's alone: a solution is not handed in (nor its checks run twice).
    assert not [c.id for c in solution.cells if HAND_IN_TAG in c.metadata.get("tags", [])]


def test_a_check_cell_without_its_call_as_a_statement_is_refused(tmp_path):
    root = _lesson_root(
        tmp_path,
        EXECUTABLE_LESSON.replace(
            "checks.check_double(double, todo=2)", "result = checks.check_double(double, todo=2)"
        ),
    )
    with pytest.raises(BuildError, match=r"the check cell of TODO 2 must call checks\."):
        split_variants(root / "notebooks" / "09_test_lesson.py", root)


def test_the_generated_cells_hand_in_from_a_jupyterlab_kernel(tmp_path, monkeypatch):
    """The test lesson's lab, filled, saved with an id and run as JupyterLab runs it: the
    kernel is told the notebook's file by JPY_SESSION_NAME (jupyter_server)."""
    root = _lesson_root(tmp_path, EXECUTABLE_LESSON)
    solution = _filled(*split_variants(root / "notebooks" / "09_test_lesson.py", root))
    call = solution.cells[-1]
    call.source = call.source.replace('LEARNER_ID = ""', 'LEARNER_ID = "kim42"')
    path = tmp_path / "work" / "09_test_lesson.ipynb"
    path.parent.mkdir()
    nbformat.write(solution, path)
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    executed = copy.deepcopy(solution)
    resources = {"metadata": {"path": str(path.parent)}}
    nbclient.NotebookClient(
        executed,
        kernel_name="python3",
        kernel_manager_class=UnixSocketKernelManager,
        resources=resources,
    ).execute()
    out = "".join(o.get("text", "") for o in executed.cells[-1].outputs)
    target = path.with_name("kim42_09_test_lesson.ipynb")
    assert out.startswith(f"2 of 2 TODOs pass: 1, 2.\n\nWrote {target}: this notebook as it")
    assert json.loads(target.read_text())["metadata"][KEY]["learner"] == "kim42"
    assert learner_id(target, ID_PATTERN) == "kim42"
    assert sorted(os.listdir(path.parent)) == [path.name, target.name]


@pytest.mark.parametrize("lesson", [LAB, "02_write_tfrecords"])
def test_the_grader_runs_and_plans_no_hand_in_cell(lesson):
    lab, solution = split_variants(REPO_ROOT / "notebooks" / f"{lesson}.py")
    solution = _filled(lab, solution)
    restored, notes = restore_protected_cells(solution, lab)
    assert notes == []
    hand_in_ids = {"hand-in-code", "hand-in"}
    assert hand_in_ids <= {c.id for c in restored.cells}
    kernel, plan = judged_cells(restored, lab, {}, 60)
    assert not hand_in_ids & {c.get("id") for c, _ in kernel}
    assert not any("hand_in(" in step.get("source", "") for step in plan)
    # A learner's hand-in cell that lost its id (kept as an added cell) is skipped too.
    edited = copy.deepcopy(solution)
    edited.cells[-1].id, edited.cells[-1].source = "x1", 'LEARNER_ID = "kim42"\nhand_in({})'
    restored, _ = restore_protected_cells(edited, lab)
    assert not any("kim42" in code for _, code in judged_cells(restored, lab, {}, 60)[0])
