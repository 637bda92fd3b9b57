"""Lab 4 where learners run it: 1 JAX device with the default training recipe (Colab's v5e-1
runs Keras on JAX), and 8 JAX devices and 8 TensorFlow replicas for a short training (the
learner's distribution over them, the batch split, the plan and a falling loss).

(Lab 4 on a 100-image folder: tests/test_real_folder_labs.py.)

Simulated devices stand in for a TPU's: on JAX, XLA_FLAGS makes 1 or 8 CPU devices
(keras.distribution.DataParallel); on TensorFlow, 8 logical CPU devices, made by an
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
from tools.building.kernels import KERNEL_OPTIONS
from tools.building.variants import split_variants

LESSON = "04_train_keras"
# Lab 4 with its default training recipe (batch per replica, images seen, epochs, steps per
# execution), on less data: 400 images stored at 64 px and trained at 32 (resized by
# augment, as 192 -> 96): a 96 px image costs the model 9 times a 32 px one.
DATA_SIZE = {"NUM_IMAGES": 400, "TARGET_SIZE": 64, "IMAGE_SIZE": 32}
# Above chance by this margin at least; and the final no more than this below the best epoch.
MARGIN_OVER_CHANCE = 0.2
MAX_DROP_FROM_BEST = 0.1
# 8 logical CPU devices; and inter-op threads for all 8 replicas: with the default (one per
# core, 2 here) the replicas' all-reduce can wait on each other for ever (it hung once);
# with 16, epochs of 6 s stalled to 42 and 83 s (the run 164-176 s); with 64 every epoch
# took 10-11 s (79 s in all, 2 cores).
TF_EIGHT_CPUS = """\
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 8)
tf.config.threading.set_inter_op_parallelism_threads(64)
"""

# A cell that runs longer fails its test, not the whole suite's time (a hang, were one to
# come back: the 8 replicas' collective ops once waited for ever).
EXECUTION_TIMEOUT_SECONDS = 900


def _run_lab4(tmp_path, parameters, env=None):
    """Executes lab 4's solution; returns all it printed on stdout, one string."""
    _, solution = split_variants(REPO_ROOT / "notebooks" / f"{LESSON}.py")
    path = tmp_path / f"{LESSON}.ipynb"
    nbformat.write(solution, path)
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        papermill.execute_notebook(
            str(path),
            str(path),
            parameters=parameters,  # The lesson's defaults, but for these.
            cwd=str(REPO_ROOT / "labs"),
            progress_bar=False,
            execution_timeout=EXECUTION_TIMEOUT_SECONDS,
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


def _assert_trained(printed):
    """Asserts the accuracy line: above chance by the margin, the final close to the best."""
    match = re.search(
        r"Validation accuracy ([\d.]+); best epoch \d+ of \d+: ([\d.]+); chance level ([\d.]+)",
        printed,
    )
    assert match, printed[-3000:]
    final, best, chance = (float(group) for group in match.groups())
    assert final >= chance + MARGIN_OVER_CHANCE, printed[-3000:]
    assert final >= best - MAX_DROP_FROM_BEST, printed[-3000:]


def _losses(printed):
    """The training loss of each epoch, from fit()'s line per epoch (verbose=2)."""
    return [float(loss) for loss in re.findall(r"^\d+/\d+ - .* - loss: ([\d.]+)", printed, re.M)]


def test_lab4_defaults_train_on_1_jax_device(tmp_path):
    """Colab's v5e-1: one JAX device, the lab's default recipe, a validation score."""
    pytest.importorskip("jax", reason="the JAX backend needs jax (requirements-dev.txt)")
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=1", "KERAS_BACKEND": "jax"}
    printed = _run_lab4(tmp_path, {**DATA_SIZE, "BACKEND": "jax"}, env)
    assert "Backend: jax (BACKEND='jax')." in printed
    assert (
        "TODO 1 passed: all 1 CPU device(s) Keras trains on here, one replica each; "
        "keras.distribution.distribution() is a DataParallel over them." in printed
    )
    assert "1 cpu replica(s), global batch 16, peak learning rate 0.002" in printed
    # 4,500 images seen in 6 epochs of whole executions of at most 16 steps: 282 steps of
    # 16, each epoch's 47 rounded up to 48 (3 executions).
    assert "Training: 288 steps of 16 images" in printed, printed[-3000:]
    _assert_trained(printed)


# Fewer images than the defaults' 4,500 on 8 replicas: 20 steps of 128 (a batch past the
# critical 48 counts as 48: 960 / 48), 10 in each of 2 epochs. Too short for a validation
# score; this asserts what 8 replicas can break: the check of TODO 1, the batch split over
# them, the plan, and the loss falling (the gradients summed over the replicas).
EIGHT_REPLICAS = {**DATA_SIZE, "TRAINING_IMAGES": 960, "EPOCHS": 2}


def test_lab4_trains_on_8_jax_devices(tmp_path):
    """Kaggle's v5e-8: 8 JAX devices under the learner's DataParallel."""
    pytest.importorskip("jax", reason="the JAX backend needs jax (requirements-dev.txt)")
    env = {"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "KERAS_BACKEND": "jax"}
    printed = _run_lab4(tmp_path, {**EIGHT_REPLICAS, "BACKEND": "jax"}, env)
    assert (
        "TODO 1 passed: all 8 CPU device(s) Keras trains on here, one replica each; "
        "keras.distribution.distribution() is a DataParallel over them." in printed
    )
    assert "8 cpu replica(s), global batch 128, peak learning rate 0.008" in printed
    assert "Training: 20 steps of 128 images" in printed, printed[-3000:]
    losses = _losses(printed)
    assert len(losses) == 2 and losses[-1] < losses[0], printed[-3000:]


def test_lab4_trains_on_8_tensorflow_replicas(tmp_path):
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-eight-cpus.py").write_text(TF_EIGHT_CPUS)
    env = {"IPYTHONDIR": str(tmp_path / "ipython"), "KERAS_BACKEND": "tensorflow"}
    printed = _run_lab4(tmp_path, {**EIGHT_REPLICAS, "BACKEND": "tensorflow"}, env)
    assert "TODO 1 passed: all 8 CPU device(s) Keras trains on here, one replica each." in printed
    assert "Keras on tensorflow: 8 replica(s) in sync on ['cpu:0', " in printed
    assert "8 cpu replica(s), global batch 128, peak learning rate 0.008" in printed
    # steps_per_execution 1: Keras fails above it under MirroredStrategy.
    assert "Training: 20 steps of 128 images" in printed, printed[-3000:]
    assert "steps_per_execution 1" in printed, printed[-3000:]
    losses = _losses(printed)
    assert len(losses) == 2 and losses[-1] < losses[0], printed[-3000:]


# What Colab writes into a notebook saved on its TPU v5e-1 runtime (Runtime > Change runtime
# type > v5e-1 TPU): uploaded with it, the lab opens on that runtime.
COLAB_TPU_V5E1 = {"accelerator": "TPU", "gpuType": "V5E1"}


@pytest.mark.parametrize("lesson", [LESSON, "05_accelerator_waiting"])
def test_only_lab_4_opens_on_colabs_tpu_runtime(tmp_path, lesson):
    """Lesson 5's accelerator is a stand-in (a sleep): it needs no TPU runtime."""
    expected = COLAB_TPU_V5E1 if lesson == LESSON else {"accelerator": None, "gpuType": None}
    for variant in split_variants(REPO_ROOT / "notebooks" / f"{lesson}.py"):
        path = tmp_path / f"{lesson}.ipynb"
        nbformat.write(variant, path)
        metadata = nbformat.read(path, as_version=4).metadata
        found = {"accelerator": metadata.get("accelerator"), **metadata.get("colab", {})}
        assert {key: found.get(key) for key in COLAB_TPU_V5E1} == expected, metadata
