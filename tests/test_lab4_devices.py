"""Lab 4 where learners run it: 8 replicas on JAX and on TensorFlow.

(Lab 4 on a 100-image folder: tests/test_real_folder_labs.py.)

Eight simulated devices stand in for a TPU's 8 cores: on JAX, XLA_FLAGS makes 8 CPU
devices (keras.distribution.DataParallel); on TensorFlow, 8 logical CPU devices, made by an
IPython start-up file before the first cell, give a MirroredStrategy. Each must be set
before the kernel's first import, so each test starts its own kernel with that environment.
The solution is built from notebooks/04_train_keras.py, so these tests do not depend on
the committed solutions/ being up to date.
"""

import os
import re

import nbformat
import papermill
import pytest

from tests.conftest import REPO_ROOT
from tools import build_notebooks as build
from tools.lesson_parameters import KERNEL_OPTIONS, SMALL_PARAMETERS

LESSON = "04_train_keras"
# Enough steps at 8 replicas for the model to beat chance: 9 steps of 32 images per epoch,
# at 4 images per replica. The learning rate, scaled x8, is 0.002: what one replica uses
# for a batch of 32 (x8 of the default 0.002 is for 8 x 32 images per step).
EIGHT_REPLICAS = {
    "NUM_IMAGES": 400,
    "BATCH_PER_REPLICA": 4,
    "EPOCHS": 10,
    "BASE_LEARNING_RATE": 0.00025,
}
# TensorFlow keeps batch normalization per replica: 4 images per replica learn too little,
# so its run takes 8 per replica (global batch 64, learning rate 0.0005 x 8 = 0.004).
TF_EIGHT_REPLICAS = {
    "NUM_IMAGES": 800,
    "BATCH_PER_REPLICA": 8,
    "EPOCHS": 10,
    "BASE_LEARNING_RATE": 0.0005,
}
# 8 logical CPU devices; and inter-op threads for all 8 replicas: with the default (one per
# core, 2 here) the replicas' all-reduce can wait on each other for ever (it hung once).
TF_EIGHT_CPUS = """\
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 8)
tf.config.threading.set_inter_op_parallelism_threads(16)
"""


def _run_lab4(tmp_path, parameters, env=None):
    """Executes lab 4's solution; returns all it printed on stdout, one string."""
    _, solution = build.split_variants(REPO_ROOT / "notebooks" / f"{LESSON}.py")
    path = tmp_path / f"{LESSON}.ipynb"
    nbformat.write(solution, path)
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        papermill.execute_notebook(
            str(path),
            str(path),
            parameters={**SMALL_PARAMETERS[LESSON], **parameters},
            cwd=str(REPO_ROOT / "labs"),
            progress_bar=False,
            **KERNEL_OPTIONS,
        )
    finally:
        os.environ.clear()
        os.environ.update(saved)
    notebook = nbformat.read(path, as_version=4)
    return "".join(
        output.get("text", "")
        for cell in notebook.cells
        for output in cell.get("outputs", [])
        if output.get("name") == "stdout"
    )


def _accuracy_and_chance(printed):
    match = re.search(r"Validation accuracy ([\d.]+); chance level ([\d.]+)", printed)
    assert match, printed[-3000:]
    return float(match.group(1)), float(match.group(2))


def test_lab4_on_8_jax_devices(tmp_path):
    pytest.importorskip("jax", reason="the JAX backend needs jax (requirements-dev.txt)")
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "KERAS_BACKEND": "jax"}
    printed = _run_lab4(tmp_path, {**EIGHT_REPLICAS, "BACKEND": "jax"}, env)
    assert "Backend: jax (BACKEND='jax')." in printed
    assert "Running on CPU with JAX: DataParallel, 8 replica(s) in sync." in printed
    assert "Device: CPU on jax, 8 replica(s); global batch 32, learning rate 0.002" in printed
    accuracy, chance = _accuracy_and_chance(printed)
    assert accuracy > chance, printed[-3000:]


def test_lab4_on_8_tensorflow_replicas(tmp_path):
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-eight-cpus.py").write_text(TF_EIGHT_CPUS)
    env = {"IPYTHONDIR": str(tmp_path / "ipython"), "KERAS_BACKEND": "tensorflow"}
    printed = _run_lab4(tmp_path, {**TF_EIGHT_REPLICAS, "BACKEND": "tensorflow"}, env)
    assert "Running on CPU with TensorFlow: MirroredStrategy, 8 replica(s) in sync." in printed
    assert "Device: CPU on tensorflow, 8 replica(s); global batch 64, learning rate 0.004" in (
        printed
    )
    accuracy, chance = _accuracy_and_chance(printed)
    assert accuracy > chance, printed[-3000:]
