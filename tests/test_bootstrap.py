"""The generated set-up cell where nothing is installed yet, and beside a decoy `utils.py`.

The bootstrap test is Colab's TPU runtime minus the network: a fresh virtual environment
with JAX and no TensorFlow, no course; lab 4 copied alone into an empty folder; its set-up
cell installs the course from $TPU_SPEED_PIPELINES_SOURCE (this checkout's path) and
tensorflow-cpu for tf.data, then trains on JAX. It takes 2-4 minutes (pip's cache warm).
"""

import os
import subprocess
import sys
import venv

import nbformat
import papermill
import pytest

from tests.conftest import REPO_ROOT
from tools import build_notebooks as build
from tools import setup_cell
from tools.lesson_parameters import KERNEL_OPTIONS, SMALL_PARAMETERS

INSTALLED = """
import importlib.metadata
for name in ("tpu-speed-pipelines", "tensorflow-cpu", "tensorflow-tpu", "tensorflow"):
    try:
        print(name, importlib.metadata.version(name))
    except importlib.metadata.PackageNotFoundError:
        print(name, "-")
"""
DECOY = 'raise_me = "a learner\'s own utils.py"\n'


def _setup_code(backend="auto"):
    code = setup_cell.render("01_tf_data_basics", has_backend_parameter=True)
    return f"BACKEND = {backend!r}\n{code}"


def test_setup_cell_finds_the_course_beside_a_decoy_utils_py(tmp_path):
    (tmp_path / "utils.py").write_text(DECOY)
    code = (
        "import utils\n"  # The learner's module was imported first: the set-up replaces it.
        + _setup_code()
        + "\nfrom utils import checks\n"
        + "print('RESULT', sys.modules['utils'].__file__, checks.__name__)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"RESULT {REPO_ROOT / 'utils' / '__init__.py'} utils.checks" in result.stdout
    assert "Installing" not in result.stdout
    assert "Backend: tensorflow (auto: no TPU attached). TensorFlow 2.21.0" in result.stdout
    assert result.stderr == ""  # TensorFlow's import-time log lines are dropped.


def test_setup_cell_says_how_to_go_on_when_the_install_fails(tmp_path):
    env = {**os.environ, setup_cell.SOURCE_ENV_VAR: str(tmp_path / "no-such-course")}
    code = _setup_code().replace("Path.cwd().parent, ", "")  # Not beside a checkout.
    # -S: no site-packages on sys.path, so the course installed in this venv is not found.
    isolated = [sys.executable, "-I", "-S", "-c", code]
    result = subprocess.run(isolated, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert result.returncode == 1
    assert f"Installing the course's package from {tmp_path / 'no-such-course'} ..." in (
        result.stdout
    )
    assert "RuntimeError: Could not install the course: " in result.stderr
    assert (
        f"Instead, clone {setup_cell.REPOSITORY_URL} and open labs/ in the clone; or upload "
        "its utils/ folder beside this notebook; or set TPU_SPEED_PIPELINES_SOURCE to a fork, "
        "a local path or a wheel, and run this cell again." in result.stderr
    )


def test_bare_notebook_on_jax_installs_the_course_and_tensorflow(tmp_path):
    pytest.importorskip("jax", reason="the bootstrap installs jax[cpu] from pip's cache")
    fresh = tmp_path / "venv"
    venv.create(fresh, with_pip=True)
    python = str(fresh / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "jax[cpu]==0.10.2", "ipykernel"], check=True, timeout=600)
    jupyter = tmp_path / "jupyter"
    subprocess.run(
        [python, "-m", "ipykernel", "install", "--prefix", str(jupyter), "--name", "bare"],
        check=True,
        capture_output=True,
    )
    folder = tmp_path / "alone"
    folder.mkdir()
    (folder / "utils.py").write_text(DECOY)
    _, solution = build.split_variants(REPO_ROOT / "notebooks" / "04_train_keras.py")
    notebook_path = folder / "04_train_keras.ipynb"
    nbformat.write(solution, notebook_path)
    saved = dict(os.environ)
    os.environ[setup_cell.SOURCE_ENV_VAR] = str(REPO_ROOT)
    os.environ["JUPYTER_PATH"] = str(jupyter / "share" / "jupyter")
    try:
        papermill.execute_notebook(
            str(notebook_path),
            str(notebook_path),
            parameters={**SMALL_PARAMETERS["04_train_keras"], "BACKEND": "jax"},
            kernel_name="bare",
            cwd=str(folder),
            progress_bar=False,
            **KERNEL_OPTIONS,
        )
    finally:
        os.environ.clear()
        os.environ.update(saved)
    executed = nbformat.read(notebook_path, as_version=4)
    printed = "".join(
        o.get("text", "") for c in executed.cells for o in c.get("outputs", [])
        if o.get("name") == "stdout"
    )  # fmt: skip
    errors = [
        o.text for c in executed.cells for o in c.get("outputs", []) if o.get("name") == "stderr"
    ]
    assert errors == []  # Quiet: no TensorFlow, absl or JAX log lines in the notebook.
    assert f"Installing the course's package from {REPO_ROOT} ..." in printed
    assert "Installing tensorflow-cpu==2.21.0 for tf.data (about a minute) ..." in printed
    assert "Backend: jax (BACKEND='jax'). TensorFlow 2.21.0, Keras " in printed
    assert "Running on CPU with JAX: DataParallel, 1 replica(s) in sync." in printed
    assert "Device: CPU on jax, 1 replica(s)" in printed
    versions = subprocess.run([python, "-c", INSTALLED], capture_output=True, text=True)
    assert versions.stdout.split() == [
        "tpu-speed-pipelines", setup_cell.course_version(),
        "tensorflow-cpu", "2.21.0", "tensorflow-tpu", "-", "tensorflow", "-",
    ], versions.stderr  # fmt: skip
