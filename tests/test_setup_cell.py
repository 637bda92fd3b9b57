"""Tests of the generated set-up cell (tools/setup_cell.py) and of utils/runtime.py."""

import os

import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tools import build_notebooks as build
from tools import setup_cell
from utils import runtime

LESSONS = [path.stem for path in build.lesson_sources(REPO_ROOT)]


def _setup_cells(notebook):
    return [c for c in notebook.cells if setup_cell.SETUP_TAG in c.metadata.get("tags", [])]


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_lesson_gets_the_one_template(lesson):
    lab, solution = build.split_variants(REPO_ROOT / "notebooks" / f"{lesson}.py")
    has_backend = lesson in ("04_train_keras", "05_accelerator_waiting")
    expected = setup_cell.render(lesson, has_backend_parameter=has_backend)
    for notebook in (lab, solution):
        (cell,) = _setup_cells(notebook)
        assert cell.source == expected
    version = setup_cell.course_version()
    assert f"course version {version}" in expected
    assert f'f"git+{{COURSE_REPOSITORY}}@v{version}"' in expected
    assert f'COURSE_REPOSITORY = "{setup_cell.REPOSITORY_URL}"' in expected
    assert 'os.environ.get("TPU_SPEED_PIPELINES_SOURCE", ' in expected
    # An assignment, not an expression: the cell shows the printed line, not a repr.
    last_line = expected.splitlines()[-1]
    backend = "BACKEND" if has_backend else '"auto"'
    assert last_line.startswith(f"course_runtime = runtime.prepare({backend})  # ")
    if has_backend:  # The parameters cell comes first: the set-up reads it.
        tags = [c.metadata.get("tags", []) for c in lab.cells]
        assert tags.index(["parameters"]) < tags.index(["setup", "nbval-ignore-output"])


def test_lesson_5_installs_beam_pinned_as_requirements_beam_txt():
    code = setup_cell.render("06_convert_with_beam", has_backend_parameter=False)
    pins = setup_cell.pinned_requirements(REPO_ROOT / "requirements-beam.txt")
    assert pins == ["apache-beam[tfrecord]==2.77.0", "pandas<3"]
    assert f"packages = {pins!r}".replace("'", '"') in code
    assert "apache_beam" not in setup_cell.render("01_tf_data_basics", has_backend_parameter=False)


def test_the_repository_address_is_written_in_one_place():
    holders = [
        path.relative_to(REPO_ROOT).as_posix()
        for folder in ("notebooks", "tools", "utils")
        for path in (REPO_ROOT / folder).rglob("*.py")
        if "github.com/tpu-speed-pipelines" in path.read_text()
        or setup_cell.GITHUB_REPO in path.read_text()
    ]
    assert holders == ["tools/setup_cell.py"]


SETUP_SOURCE = """# %% [markdown]
# # Lab 9 · A test lesson
#
# **You will:**
#
# 1. Make a number (TODO 1).

# %% tags=["setup"]
# The build puts the set-up code here.

# %% tags=["parameters"]
BACKEND = "auto"

# %%
# TODO 1: make a number.
### BEGIN SOLUTION
answer = 42
### END SOLUTION

# %%
checks.check_number(answer, todo=1)
"""


@pytest.mark.parametrize(
    "edit, message",
    [
        (("", ""), r"the parameters cell sets BACKEND, so it must come before the cell tagged"),
        (
            ('BACKEND = "auto"', 'SIZE = 1\n\n# %% tags=["setup"]\nx = 1'),
            r"expected one code cell tagged setup \(the build puts the set-up code there\); "
            r"found 2",
        ),
    ],
)
def test_build_refuses_a_misplaced_or_doubled_setup_cell(tmp_path, edit, message):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\nversion = "9.9"\n')
    source = tmp_path / "notebooks" / "09_test.py"
    source.write_text(SETUP_SOURCE.replace(*edit))
    with pytest.raises(build.BuildError, match=message):
        build.split_variants(source, tmp_path)


def test_cells_without_checked_output_are_ignored_by_strict_nbval():
    lab, _ = build.split_variants(REPO_ROOT / "notebooks" / "01_tf_data_basics.py")
    for cell in lab.cells:
        if cell.cell_type != "code" or "parameters" in cell.metadata.get("tags", []):
            continue
        ignored = "nbval-ignore-output" in cell.metadata.get("tags", [])
        assert ignored == ("# NBVAL_CHECK_OUTPUT" not in cell.source), cell.source[:80]
    nbformat.validate(lab)


def test_choose_backend(monkeypatch):
    monkeypatch.delenv("KERAS_BACKEND", raising=False)
    monkeypatch.setattr(runtime, "attached_tpu", lambda: None)
    assert runtime.choose_backend() == runtime.Runtime("tensorflow", "auto: no TPU attached")
    monkeypatch.setattr(runtime, "attached_tpu", lambda: "/dev/accel0")
    monkeypatch.setattr(runtime, "_installed", lambda name: False)
    assert runtime.choose_backend("auto") == runtime.Runtime(
        "jax",
        "auto: a TPU is attached (/dev/accel0), JAX is installed and TensorFlow has no TPU "
        "support here",
    )
    monkeypatch.setattr(runtime, "_installed", lambda name: name == "tensorflow-tpu")
    assert runtime.choose_backend().backend == "tensorflow"  # Kaggle's TPU VM.
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    assert runtime.choose_backend() == runtime.Runtime("jax", "auto: KERAS_BACKEND=jax is set")
    assert runtime.choose_backend("tensorflow") == runtime.Runtime(
        "tensorflow", "BACKEND='tensorflow'"
    )
    with pytest.raises(ValueError, match=r"^`BACKEND` must be one of .*Received: BACKEND='torch'"):
        runtime.choose_backend("torch")


def test_prepare_refuses_to_switch_the_backend_of_a_running_kernel():
    import keras

    assert keras.backend.backend() == "tensorflow"
    pytest.importorskip("jax", reason="the JAX branch needs jax (requirements-dev.txt)")
    saved = os.environ.get("KERAS_BACKEND")
    with pytest.raises(ValueError, match=r"Keras is already running on tensorflow in this "
                       r"kernel; jax needs a fresh one\. Restart the kernel"):  # fmt: skip
        runtime.prepare("jax")
    assert os.environ.get("KERAS_BACKEND") == saved


def test_tensorflow_pin_matches_requirements_txt():
    requirement = runtime.tensorflow_requirement()
    assert requirement == "tensorflow-cpu==2.21.0"  # Linux x86_64, as in CI.
    assert requirement in (REPO_ROOT / "requirements.txt").read_text()
