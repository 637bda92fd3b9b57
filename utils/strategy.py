"""One helper that finds the best accelerator: a TPU, GPUs, or the CPU, and says which it took.

Observed with TensorFlow 2.21 on a machine without a TPU:
- `TPUClusterResolver(tpu="local")` (TPU VMs) builds, but initializing the TPU system
  raises `NotFoundError` ("TPUs not found in the cluster").
- `TPUClusterResolver()` (the older, named resolver) raises `ValueError` ("Please
  provide a TPU Name to connect to") when no name is set.
- A TPU address that does not answer raises `UnimplementedError` or `UnavailableError`.
All of these are caught and reported; the search goes on to the next kind of device.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable

import tensorflow as tf

DEVICE_ENV_VAR = "TPU_SPEED_PIPELINES_DEVICE"
DEVICES = ("auto", "tpu", "gpu", "cpu")
# Images per replica per step: the usual rule of thumb is 128 per TPU core; GPUs and
# CPUs take smaller batches (a CPU step of 128 images is slow and gains nothing).
BATCH_PER_REPLICA = {"TPU": 128, "GPU": 64, "CPU": 32}
PRECISION_POLICY = {"TPU": "mixed_bfloat16", "GPU": "mixed_float16", "CPU": "float32"}
_TPU_ERRORS = (ValueError, RuntimeError, tf.errors.OpError)


@dataclasses.dataclass(frozen=True)
class StrategyChoice:
    """The strategy found, and what was tried on the way.

    Attributes:
        strategy: the `tf.distribute.Strategy` to build and train the model under.
        kind: "TPU", "GPU" or "CPU".
        devices: names of the devices the strategy uses.
        attempts: one line per branch tried before this one, with why it did not work.
    """

    strategy: tf.distribute.Strategy
    kind: str
    devices: tuple[str, ...]
    attempts: tuple[str, ...] = ()

    @property
    def num_replicas(self) -> int:
        return self.strategy.num_replicas_in_sync

    def describe(self) -> str:
        """Returns the report `find_strategy` prints."""
        lines = [f"  tried {attempt}" for attempt in self.attempts]
        lines.append(
            f"Running on {self.kind}: {type(self.strategy).__name__}, "
            f"{self.num_replicas} replica(s) in sync."
        )
        lines.append("Devices: " + ", ".join(self.devices))
        return "\n".join(lines)


def connect_tpu(tpu: str) -> tf.distribute.Strategy:
    """Connects to the TPU `tpu` ("local" on a TPU VM, else a name or grpc:// address)."""
    logger = tf.get_logger()
    level = logger.level
    logger.setLevel("WARNING")  # Initializing logs INFO lines even when it fails.
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu or None)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    finally:
        logger.setLevel(level)


def list_gpus() -> list[str]:
    """Returns the names of the logical GPU devices."""
    return [device.name for device in tf.config.list_logical_devices("GPU")]


def find_strategy(
    device: str | None = None,
    *,
    tpu_name: str | None = None,
    connect_tpu: Callable[[str], tf.distribute.Strategy] = connect_tpu,
    list_gpus: Callable[[], list[str]] = list_gpus,
) -> StrategyChoice:
    """Finds the strategy for the best device here, prints which it took, and returns it.

    In order: a TPU VM's TPU (`tpu="local"`); a TPU by name (`tpu_name`, else the
    `TPU_NAME` or `COLAB_TPU_ADDR` environment variable: the older resolver); all GPUs
    (`MirroredStrategy` for several, `OneDeviceStrategy` for one); else the CPU (the
    default strategy).

    Args:
        device: "auto" (the order above), "tpu", "gpu" or "cpu" to force one; None reads
            `$TPU_SPEED_PIPELINES_DEVICE`, else "auto".
        tpu_name: the TPU's name or grpc:// address for the older resolver.
        connect_tpu: connects to a TPU and returns its strategy (replaced in tests).
        list_gpus: returns the GPU device names (replaced in tests).

    Returns:
        A `StrategyChoice`; its description is printed.

    Raises:
        ValueError: if `device` is unknown, or a forced device is not there.

    Example:
        choice = strategy.find_strategy()
        with choice.strategy.scope():
            model = make_model()
    """
    device = (device or os.environ.get(DEVICE_ENV_VAR) or "auto").lower()
    if device not in DEVICES:
        raise ValueError(f"`device` must be one of {DEVICES}. Received: device={device!r}")
    attempts = []
    if device in ("auto", "tpu"):
        name = tpu_name or os.environ.get("TPU_NAME") or os.environ.get("COLAB_TPU_ADDR")
        for tpu in ["local", name] if name else ["local"]:
            try:
                tpu_strategy = connect_tpu(tpu)
            except _TPU_ERRORS as error:
                attempts.append(f"TPU {tpu!r}: {type(error).__name__}: {_first_line(error)}")
                continue
            devices = tuple(d.name for d in tf.config.list_logical_devices("TPU"))
            return _report(StrategyChoice(tpu_strategy, "TPU", devices, tuple(attempts)))
        if not name:
            attempts.append("TPU by name: no tpu_name, $TPU_NAME or $COLAB_TPU_ADDR set")
        if device == "tpu":
            raise ValueError("No TPU found (device='tpu'). " + "; ".join(attempts))
    if device in ("auto", "gpu"):
        gpus = list_gpus()
        if len(gpus) > 1:
            found = tf.distribute.MirroredStrategy(gpus)
            return _report(StrategyChoice(found, "GPU", tuple(gpus), tuple(attempts)))
        if len(gpus) == 1:
            found = tf.distribute.OneDeviceStrategy(gpus[0])
            return _report(StrategyChoice(found, "GPU", tuple(gpus), tuple(attempts)))
        attempts.append("GPU: none found")
        if device == "gpu":
            raise ValueError("No GPU found (device='gpu').")
    cpus = tuple(d.name for d in tf.config.list_logical_devices("CPU"))
    return _report(StrategyChoice(tf.distribute.get_strategy(), "CPU", cpus, tuple(attempts)))


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:160] if text else ""


def _report(choice: StrategyChoice) -> StrategyChoice:
    print(choice.describe())
    return choice
