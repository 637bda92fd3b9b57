"""Issue 14: labs 1-4 run to the end on a learner's own folders (items 1, 2, 12).

The solutions are built here from `notebooks/` (not read from `solutions/`), so the test
runs the current sources. Each lab runs with the small parameters of
`tools/lesson_parameters.py` and `DATA_SOURCE` set to the folder; each lesson gets its
own temporary folder as `TMPDIR`, which must be empty afterwards (item 12: lab 2 left
folders in /tmp on every run).
"""

import shutil

import nbformat
import papermill
import pytest

from tests.conftest import REPO_ROOT
from tools import build_notebooks as build
from tools.lesson_parameters import SMALL_PARAMETERS

LABS = ["01_tf_data_basics", "02_write_tfrecords", "03_read_tfrecords", "04_train_keras"]
# Lab 3 times and traces more images than a small folder holds (its timeline raises when
# the records run out); these fit the 36 readable photos.
SMALL_FOLDER_PARAMETERS = {
    "03_read_tfrecords": {
        "NUM_TIMED_IMAGES": 64,
        "ABLATION_SHARD_COUNTS": [1, 2],
        "BATCH_SIZE": 8,
        "TIMELINE_BATCHES": 4,
    },
    "04_train_keras": {"VALIDATION_SHARDS": 1},
}


def _run_solution(lesson, folder, tmp_path, monkeypatch):
    """Runs the solution of `lesson` on `folder`; returns (executed notebook, error or None)."""
    _, solution = build.split_variants(REPO_ROOT / "notebooks" / f"{lesson}.py")
    path = tmp_path / f"{lesson}.ipynb"
    nbformat.write(solution, path)
    output = tmp_path / f"{lesson}.executed.ipynb"
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))  # The kernel's tempfile folder.
    parameters = {
        **SMALL_PARAMETERS[lesson],
        **SMALL_FOLDER_PARAMETERS.get(lesson, {}),
        "DATA_SOURCE": str(folder),
    }
    error = None
    try:
        papermill.execute_notebook(
            str(path), str(output), parameters=parameters, cwd=str(REPO_ROOT / "labs"),
            progress_bar=False, kernel_name="python3", execution_timeout=300,
        )  # fmt: skip
    except papermill.PapermillExecutionError as raised:
        error = raised
    return nbformat.read(output, as_version=4), error, sorted(p.name for p in scratch.iterdir())


def _text(notebook):
    return "".join(
        output.get("text", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.get("name") == "stdout"
    )


@pytest.fixture(scope="module")
def hundred_image_folder(tmp_path_factory, small_flowers):
    """A learner's folder of 100 images (the embedded flowers, copied)."""
    from utils import data

    root = data.make_flowers_dataset(100)
    folder = tmp_path_factory.mktemp("hundred") / "my flowers"
    for class_folder in root.iterdir():
        if class_folder.is_dir():
            shutil.copytree(class_folder, folder / class_folder.name)
    return folder


@pytest.mark.parametrize("lesson", LABS)
def test_lab_runs_to_the_end_on_a_real_photo_folder(
    lesson, real_photo_folder, tmp_path, monkeypatch
):
    notebook, error, left_in_tmp = _run_solution(
        lesson, real_photo_folder["root"], tmp_path, monkeypatch
    )
    assert error is None, f"{lesson} failed on the real-photo folder: {error}"
    assert left_in_tmp == [], f"{lesson} left {left_in_tmp} in its TMPDIR"
    text = _text(notebook)
    if lesson == "01_tf_data_basics":
        # The unreadable files are listed when the sample passes them, never a crash.
        assert "TODO 4 passed" in text
    if lesson == "02_write_tfrecords":
        assert "Input images: 39 = 36 written + 3 skipped." in text
        assert "Valid: every record parses, every count matches." in text


@pytest.mark.parametrize("lesson", LABS)
def test_lab_runs_to_the_end_on_a_100_image_folder(
    lesson, hundred_image_folder, tmp_path, monkeypatch
):
    _, error, left_in_tmp = _run_solution(lesson, hundred_image_folder, tmp_path, monkeypatch)
    assert error is None, f"{lesson} failed on a 100-image folder: {error}"
    assert left_in_tmp == [], f"{lesson} left {left_in_tmp} in its TMPDIR"
