"""Issue 14: labs 1-4 run to the end on a learner's own folders (items 1, 2, 12).

The solutions are built here from `notebooks/` (not read from `solutions/`), so the test
runs the current sources. Each lab runs with the small parameters of
`tools/building/lesson_parameters.py` and `DATA_SOURCE` set to the folder, two labs at a time
(`tests/notebook_runs.py`); each lesson gets its own temporary folder as `TMPDIR`, which
must be empty afterwards (item 12: lab 2 left folders in /tmp on every run).
"""

import re
import shutil

import nbformat
import pytest

from tests import notebook_runs
from tests.conftest import REPO_ROOT
from tools.building.lesson_parameters import SMALL_PARAMETERS
from tools.building.variants import split_variants

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


def _job(lesson, folder, tmp_path):
    """The run of `lesson`'s solution on `folder`, in `tmp_path`, with its own TMPDIR."""
    _, solution = split_variants(REPO_ROOT / "notebooks" / f"{lesson}.py")
    path = tmp_path / f"{lesson}.ipynb"
    nbformat.write(solution, path)
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    parameters = {
        **SMALL_PARAMETERS[lesson],
        **SMALL_FOLDER_PARAMETERS.get(lesson, {}),
        "DATA_SOURCE": str(folder),
    }
    return notebook_runs.Job(
        input=path,
        output=tmp_path / f"{lesson}.executed.ipynb",
        parameters=parameters,
        cwd=REPO_ROOT / "labs",
        tmpdir=scratch,
        options={"kernel_name": "python3", "execution_timeout": 300},
    )


@pytest.fixture(scope="module")
def solution_runs(request, hundred_image_folder, tmp_path_factory):
    """{lesson: (executed notebook, error or None, what it left in its TMPDIR)} of the
    selected tests' labs, run two at a time (`notebook_runs`)."""
    selected = {
        item.callspec.params["lesson"]
        for item in request.session.items
        if getattr(item, "module", None) is request.module and hasattr(item, "callspec")
    }
    jobs = {
        lesson: _job(lesson, hundred_image_folder, tmp_path_factory.mktemp(lesson[:2]))
        for lesson in LABS
        if lesson in selected
    }
    return {
        lesson: (
            nbformat.read(jobs[lesson].output, as_version=4),
            error,
            sorted(p.name for p in jobs[lesson].tmpdir.iterdir()),
        )
        for lesson, error in notebook_runs.execute_all(jobs).items()
    }


def _text(notebook):
    return "".join(
        output.get("text", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.get("name") == "stdout"
    )


@pytest.fixture(scope="module")
def hundred_image_folder(tmp_path_factory, real_photo_folder):
    """The real-photo folder (39 input images, 3 unreadable), grown to 100 input images.

    The 61 more are the embedded flowers' JPEGs, spread over its 4 classes; one run per lab
    covers both cases of the issue: a folder with trouble, and a 100-image folder (lab 4's
    validation shard is then smaller than one batch, which used to crash it).
    """
    from utils.lab import data

    folder = tmp_path_factory.mktemp("hundred") / "photos [2024]"
    shutil.copytree(real_photo_folder["root"], folder)
    flowers = sorted(data.make_flowers_dataset(61).glob("*/*.jpg"))
    for index, path in enumerate(flowers):
        class_name = real_photo_folder["classes"][index % len(real_photo_folder["classes"])]
        shutil.copy(path, folder / class_name / f"flower_{index:02d}.jpg")
    return folder


@pytest.mark.parametrize("lesson", LABS)
def test_lab_runs_to_the_end_on_a_real_100_image_folder(lesson, solution_runs):
    notebook, error, left_in_tmp = solution_runs[lesson]
    assert error is None, f"{lesson} failed on the real-photo folder: {error}"
    assert left_in_tmp == [], f"{lesson} left {left_in_tmp} in its TMPDIR"
    text = _text(notebook)
    if lesson == "01_tf_data_basics":
        # The unreadable files are passed over by every check (TODO 2's samples one readable
        # image per class), never a crash.
        assert [f"TODO {n} passed" in text for n in (1, 2, 3)] == [True] * 3
    if lesson == "02_write_tfrecords":
        assert "Input images: 100 = 97 written + 3 skipped." in text
        assert "Valid: every record parses, every count matches." in text
    if lesson == "04_train_keras":
        match = re.search(r"validation: 1 shards?, (\d+) images", text)
        assert match, text[-3000:]
        num_validation = int(match.group(1))
        assert num_validation < 32  # Fewer than the old global batch: what used to crash.
        assert re.search(r"^Validation accuracy [\d.]+; best epoch", text, re.M), text[-3000:]
