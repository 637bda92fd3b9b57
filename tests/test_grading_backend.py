"""Lab 4 graded on the Keras backend the learner's notebook ran on (issue 61 item 2).

The learner's set-up output says the backend ("Backend: jax (...)"); without one the grader
takes the committed solution's (JAX). On JAX the kernel and the judge both run with
`run.GRADER_DEVICES` simulated CPU devices, and the distribution the kernel set crosses to
the judge, so TODO 1's JAX half is judged as the notebook judges it.
"""

import copy

import nbformat
import pytest

from tests.conftest import REPO_ROOT
from tests.test_grade import _set_todo, grade_with_fixed_limits, needs_bwrap
from tools.building.variants import split_variants
from tools.grading.kernel import cells
from tools.grading.submission import run

LAB4 = "04_train_keras"
NO_DISTRIBUTION = "devices = keras.distribution.list_devices()\n"
FIRST_DEVICE_ONLY = (
    "devices = keras.distribution.list_devices()\n"
    "keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices[:1]))\n"
)
JAX_DEVICES = (
    "import jax\n\n"
    "devices = jax.devices()\n"
    "keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))\n"
)


def _variants():
    return split_variants(REPO_ROOT / "notebooks" / f"{LAB4}.py")


def _said(notebook, line):
    """`notebook` whose set-up cell's saved output is `line`, as the learner's run left it."""
    notebook = copy.deepcopy(notebook)
    setup = next(c for c in notebook.cells if "setup" in c.metadata.get("tags", []))
    setup.outputs = [nbformat.v4.new_output("stream", name="stdout", text=line + "\n")]
    return notebook


def test_the_backend_is_the_one_the_learners_set_up_output_says():
    lab, _ = _variants()
    said_tf = _said(lab, "Backend: tensorflow (auto: no TPU attached). TensorFlow 2.21.0")
    said_jax = _said(lab, "Backend: jax (auto: KERAS_BACKEND=jax is set). TensorFlow 2.21.0")
    assert run.learner_backend(said_tf) == "tensorflow"
    assert run.learner_backend(said_jax) == "jax"
    assert run.learner_backend(lab) is None
    assert run.keras_environment(lab, said_tf) == {"KERAS_BACKEND": "tensorflow"}
    on_jax = {"KERAS_BACKEND": "jax", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    assert run.keras_environment(lab, said_jax) == on_jax
    assert run.keras_environment(lab, lab) == on_jax  # No output: the solution's backend.


def test_a_lab_without_a_backend_parameter_runs_as_before():
    lab1 = split_variants(REPO_ROOT / "notebooks" / "01_tf_data_basics.py")[0]
    assert run.keras_environment(lab1, lab1) == {}


def test_on_jax_the_kernels_distribution_is_kept_and_set_in_the_judge():
    keep = nbformat.v4.new_code_cell(id="grader-keep-1")
    prepared = [(keep, cells.keep_code(1, ["devices"]))]
    plan = [{"kind": "fetch", "todo": 1, "names": ["devices"]}, {"kind": "check", "todo": 1}]
    kept, steps = run.with_keras_distribution(prepared, plan)
    assert len(kept) == 1
    assert kept[0][1] == run.BIND_DISTRIBUTION + cells.keep_code(
        1, ["devices", run.KERAS_DISTRIBUTION]
    )
    assert [step["kind"] for step in steps] == ["fetch", "code", "check"]
    assert steps[0]["names"] == ["devices", run.KERAS_DISTRIBUTION]
    assert steps[1]["source"] == run.SET_DISTRIBUTION


def test_the_judge_sets_the_distribution_the_kernel_described():
    """The kernel's and the judge's code, run in one JAX process of 2 devices."""
    code = f"""
import os
os.environ.update(KERAS_BACKEND="jax", XLA_FLAGS="--xla_force_host_platform_device_count=2")
import keras
names = keras.distribution.list_devices()
keras.distribution.set_distribution(keras.distribution.DataParallel(devices=names[:1]))
exec({run.BIND_DISTRIBUTION!r})
described = {run.KERAS_DISTRIBUTION}
keras.distribution.set_distribution(None)
exec({run.SET_DISTRIBUTION!r})
mesh = keras.distribution.distribution().device_mesh.devices.tolist()
print(described, type(keras.distribution.distribution()).__name__, mesh)
"""
    import subprocess
    import sys

    said = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    assert said.stdout.strip() == (
        "{'kind': 'DataParallel', 'devices': ['cpu:0']} DataParallel ['cpu:0']"
    )


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("submissions")
    lab, solution = _variants()
    tensorflow_line = "Backend: tensorflow (auto: no TPU attached). TensorFlow 2.21.0"
    notebooks = {
        "sol_04.ipynb": solution,
        "x-nodistribution_04.ipynb": _set_todo(solution, 1, NO_DISTRIBUTION),
        "x-firstdevice_04.ipynb": _set_todo(solution, 1, FIRST_DEVICE_ONLY),
        "y-jaxdevices_04.ipynb": _set_todo(solution, 1, JAX_DEVICES),
        # On TensorFlow no distribution is set: the learner's run passes TODO 1, so here too.
        "y-tensorflow_04.ipynb": _said(_set_todo(solution, 1, NO_DISTRIBUTION), tensorflow_line),
    }
    for name, notebook in notebooks.items():
        nbformat.write(notebook, folder / name)
    return grade_with_fixed_limits(folder, tmp_path_factory.mktemp("grades"))


@needs_bwrap
def test_lab_4_is_graded_on_the_learners_backend(graded):
    status, rows, report = graded
    assert status == 0
    found = {name: [row["TODO 1"], row["TODO 2"]] for name, row in rows.items()}
    assert found == {
        "sol_04.ipynb": ["1", "1"],
        "x-nodistribution_04.ipynb": ["0", "1"],
        "x-firstdevice_04.ipynb": ["0", "1"],
        "y-jaxdevices_04.ipynb": ["1", "1"],
        "y-tensorflow_04.ipynb": ["1", "1"],
    }
    assert (
        "x-nodistribution_04.ipynb, TODO 1: TODO 1 (devices): expected fit() to train on " in report
    )
    assert "Keras has no distribution set." in report
    assert (
        "x-firstdevice_04.ipynb, TODO 1: TODO 1 (devices): expected the distribution set over "
        "`devices`, \\['cpu:0', 'cpu:1'\\]; it is over \\['cpu:0'\\]."
    ) in report
