"""Tests of utils/strategy.py (each branch reachable here for real, the others with fakes)
and utils/batch_sizes.py."""

import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from tests.conftest import REPO_ROOT
from utils import batch_sizes, strategy


class FakeTPUStrategy:
    """Stands in for a TPUStrategy: what StrategyChoice reads of it."""

    num_replicas_in_sync = 8


def _no_tpu(tpu):
    raise tf.errors.NotFoundError(None, None, "TPUs not found in the cluster.")


def _no_gpus():
    return []


def test_cpu_forced_gives_the_default_strategy(capsys):
    choice = strategy.find_strategy("cpu")
    assert choice.kind == "CPU" and choice.num_replicas == 1
    assert choice.strategy is tf.distribute.get_strategy()
    assert choice.attempts == () and choice.devices[0].endswith("CPU:0")
    assert (
        "Running on CPU with TensorFlow: _DefaultDistributionStrategy, 1 replica(s) in sync."
        in (capsys.readouterr().out)
    )


def test_auto_here_falls_back_to_cpu_through_the_real_tpu_and_gpu_branches(monkeypatch, capsys):
    for name in ("TPU_NAME", "COLAB_TPU_ADDR", strategy.DEVICE_ENV_VAR):
        monkeypatch.delenv(name, raising=False)
    choice = strategy.find_strategy()
    assert choice.kind == "CPU"
    assert choice.attempts[0].startswith("TPU 'local': NotFoundError: TPUs not found")
    assert choice.attempts[1:] == (
        "TPU by name: no tpu_name, $TPU_NAME or $COLAB_TPU_ADDR set",
        "GPU: none found",
    )
    out = capsys.readouterr().out
    assert "tried TPU 'local': NotFoundError" in out and "Running on CPU" in out
    # The failed TPU attempt leaves TensorFlow usable on the CPU.
    assert float(tf.reduce_sum(tf.ones((2, 2)))) == 4.0


def test_older_resolver_without_a_name_raises_value_error_and_is_caught():
    choice = strategy.find_strategy(
        "auto",
        tpu_name="",
        connect_tpu=lambda tpu: strategy.connect_tpu(tpu if tpu != "local" else ""),
        list_gpus=_no_gpus,
    )
    assert choice.kind == "CPU"
    assert choice.attempts[0] == "TPU 'local': ValueError: Please provide a TPU Name to connect to."


def test_tpu_vm_branch_with_a_fake_tpu():
    tried = []

    def connect(tpu):
        tried.append(tpu)
        return FakeTPUStrategy()

    choice = strategy.find_strategy("auto", connect_tpu=connect, list_gpus=_no_gpus)
    assert tried == ["local"] and choice.kind == "TPU" and choice.num_replicas == 8
    assert choice.attempts == ()


def test_named_tpu_branch_after_tpu_local_fails(monkeypatch):
    monkeypatch.setenv("COLAB_TPU_ADDR", "10.0.0.2:8470")
    tried = []

    def connect(tpu):
        tried.append(tpu)
        if tpu == "local":
            _no_tpu(tpu)
        return FakeTPUStrategy()

    choice = strategy.find_strategy("tpu", connect_tpu=connect, list_gpus=_no_gpus)
    assert tried == ["local", "10.0.0.2:8470"] and choice.kind == "TPU"
    assert choice.attempts == ("TPU 'local': NotFoundError: TPUs not found in the cluster.",)


def test_forced_tpu_or_gpu_that_is_not_there_says_so(monkeypatch):
    for name in ("TPU_NAME", "COLAB_TPU_ADDR"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match=r"No TPU found \(device='tpu'\)\. TPU 'local'") as tpu:
        strategy.find_strategy("tpu", connect_tpu=_no_tpu, list_gpus=_no_gpus)
    assert str(tpu.value).endswith(
        "no tpu_name, $TPU_NAME or $COLAB_TPU_ADDR set. Run on a TPU VM (Kaggle, Google "
        "Cloud), or pass tpu_name= (or set $TPU_NAME) to a TPU's name or grpc:// address; "
        "device='auto' takes the best device here."
    )
    with pytest.raises(ValueError) as gpu:
        strategy.find_strategy("gpu", connect_tpu=_no_tpu, list_gpus=_no_gpus)
    assert str(gpu.value) == (
        "No GPU found (device='gpu'): TensorFlow lists no GPU device "
        "(tf.config.list_logical_devices('GPU') is empty). Choose a GPU runtime (Colab: "
        "Runtime > Change runtime type), or install TensorFlow with GPU support (Linux: pip "
        "install 'tensorflow[and-cuda]'; tensorflow-cpu has none); device='auto' takes the "
        "best device here."
    )


def test_gpu_forced_skips_the_tpu():
    def never(tpu):
        raise AssertionError("the TPU must not be tried when device='gpu'")

    choice = strategy.find_strategy("gpu", connect_tpu=never, list_gpus=lambda: ["/cpu:0"])
    assert choice.kind == "GPU" and isinstance(choice.strategy, tf.distribute.OneDeviceStrategy)
    assert choice.devices == ("/cpu:0",)


def test_device_from_environment_and_unknown_device(monkeypatch):
    monkeypatch.setenv(strategy.DEVICE_ENV_VAR, "CPU")
    assert strategy.find_strategy(connect_tpu=_no_tpu).attempts == ()
    with pytest.raises(ValueError, match=r"`device` must be one of .*Received: device='npu'"):
        strategy.find_strategy("npu")


def test_several_gpus_give_a_mirrored_strategy():
    # Two logical CPU devices stand in for two GPUs; they must be made before TensorFlow
    # starts, so this runs in a fresh process.
    code = textwrap.dedent(
        """
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        from utils import batch_sizes, strategy
        names = [d.name for d in tf.config.list_logical_devices("CPU")]
        choice = strategy.find_strategy("gpu", list_gpus=lambda: names)
        print("RESULT", type(choice.strategy).__name__, choice.num_replicas)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert "RESULT MirroredStrategy 2" in result.stdout, result.stderr[-2000:]


JAX_CODE = """
from utils import batch_sizes, strategy
choice = strategy.find_strategy("auto")
with choice.scope():
    pass
kind = type(choice.distribution).__name__
print("RESULT", choice.backend, choice.kind, choice.num_replicas, kind)
try:
    strategy.find_strategy("tpu")
except ValueError as error:
    print("FORCED", error)
"""


def test_jax_backend_sets_data_parallel_over_every_device():
    pytest.importorskip("jax", reason="the JAX branch needs jax (requirements-dev.txt)")
    env = {
        **os.environ,
        "KERAS_BACKEND": "jax",
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
    }
    result = subprocess.run(
        [sys.executable, "-c", JAX_CODE],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Running on CPU with JAX: DataParallel, 8 replica(s) in sync." in result.stdout, (
        result.stderr[-2000:]
    )
    assert "RESULT jax CPU 8 DataParallel" in result.stdout
    assert "FORCED No TPU found (device='tpu'): " in result.stdout


def test_several_logical_cpus_give_a_mirrored_strategy_on_the_cpu():
    code = textwrap.dedent(
        """
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 8)
        from utils import batch_sizes, strategy
        choice = strategy.find_strategy("cpu")
        print("RESULT", type(choice.strategy).__name__, choice.num_replicas)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert "RESULT MirroredStrategy 8" in result.stdout, result.stderr[-2000:]


def test_even_batch_size_leaves_the_fewest_images_out():
    assert batch_sizes.even_batch_size(687, max_batch_size=256, num_replicas=8) == 224
    assert batch_sizes.even_batch_size(687, max_batch_size=1024, num_replicas=8) == 680
    assert batch_sizes.even_batch_size(687, max_batch_size=32, num_replicas=1) == 31
    assert batch_sizes.even_batch_size(18, max_batch_size=32, num_replicas=1) == 18
    assert batch_sizes.even_batch_size(45, max_batch_size=64, num_replicas=2) == 44
    with pytest.raises(ValueError, match=r"^5 image\(s\) cannot feed 8 replicas"):
        batch_sizes.even_batch_size(5, max_batch_size=256, num_replicas=8)


def test_cap_batch_size_keeps_a_multiple_of_the_replicas(capsys):
    assert batch_sizes.cap_batch_size(32, num_images=100, num_replicas=1, purpose="training") == 32
    assert capsys.readouterr().out == ""
    capped = batch_sizes.cap_batch_size(1024, num_images=687, num_replicas=8, purpose="validation")
    assert capped == 680
    assert capsys.readouterr().out == (
        "The validation batch of 1024 is larger than the 687 validation images: capped to 680 "
        "(85 per replica).\n"
    )
    assert batch_sizes.cap_batch_size(64, num_images=45, num_replicas=2, purpose="training") == 44
    assert "capped to 44 (22 per replica)" in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"^5 training image\(s\) cannot feed 8 replicas"):
        batch_sizes.cap_batch_size(256, num_images=5, num_replicas=8, purpose="training")
