"""One helper that finds the best accelerator: a TPU, GPUs, or the CPU, and says which it took.

It follows the Keras backend (`utils.lab.runtime` chooses it). On TensorFlow it returns a
`tf.distribute` strategy; on JAX it sets `keras.distribution.DataParallel` over
`jax.devices()` (each batch split over the devices, the weights copied on each). Either
way, build the model under `choice.scope()`.

Observed with TensorFlow 2.21 on a machine without a TPU:
- `TPUClusterResolver(tpu="local")` (TPU VMs) builds, but initializing the TPU system
  raises `NotFoundError` ("TPUs not found in the cluster").
- `TPUClusterResolver()` (the older, named resolver) raises `ValueError` ("Please
  provide a TPU Name to connect to") when no name is set.
- A TPU address that does not answer raises `UnimplementedError` or `UnavailableError`.
All of these are caught and reported; the search goes on to the next kind of device.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable

import tensorflow as tf

from utils import errors

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
        strategy: on TensorFlow, the `tf.distribute.Strategy` to build and train under;
            None on JAX.
        kind: "TPU", "GPU" or "CPU".
        devices: names of the devices the strategy uses.
        attempts: one line per branch tried before this one, with why it did not work.
        distribution: on JAX, the `keras.distribution.DataParallel` set; None on TensorFlow.
    """

    strategy: tf.distribute.Strategy | None
    kind: str
    devices: tuple[str, ...]
    attempts: tuple[str, ...] = ()
    distribution: object = None

    @property
    def backend(self) -> str:
        """The Keras backend the strategy is for: "tensorflow" or "jax"."""
        return "tensorflow" if self.strategy is not None else "jax"

    @property
    def num_replicas(self) -> int:
        """The replicas that train in sync: one batch is split over them."""
        if self.strategy is None:
            return len(self.devices)
        return self.strategy.num_replicas_in_sync

    def scope(self) -> contextlib.AbstractContextManager:
        """The scope to build the model in: the strategy's on TensorFlow; none needed on JAX.

        Returns:
            A context manager: `with choice.scope(): model = ...`.
        """
        if self.strategy is None:
            return contextlib.nullcontext()
        return self.strategy.scope()

    def describe(self) -> str:
        """Returns the report `find_strategy` prints.

        Returns:
            One line per branch tried, the device kind, backend and replicas, the devices.
        """
        lines = [f"  tried {attempt}" for attempt in self.attempts]
        how = type(self.strategy if self.strategy is not None else self.distribution).__name__
        backend = "TensorFlow" if self.strategy is not None else "JAX"
        lines.append(
            f"Running on {self.kind} with {backend}: {how}, {self.num_replicas} replica(s) in sync."
        )
        lines.append("Devices: " + ", ".join(self.devices))
        return "\n".join(lines)


def connect_tpu(tpu: str) -> tf.distribute.Strategy:
    """Connects to a TPU and initializes it.

    Args:
        tpu: "local" on a TPU VM, else the TPU's name or grpc:// address.

    Returns:
        A `tf.distribute.TPUStrategy` over its cores.

    Raises:
        ValueError, RuntimeError or tf.errors.OpError: from TensorFlow when there is no
            such TPU (`find_strategy` catches them and tries the next device).
    """
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
    """Returns the names of the GPUs TensorFlow sees.

    Returns:
        The logical GPU devices' names ("/device:GPU:0", ...); empty without a GPU.
    """
    return [device.name for device in tf.config.list_logical_devices("GPU")]


def find_strategy(
    device: str | None = None,
    *,
    tpu_name: str | None = None,
    connect_tpu: Callable[[str], tf.distribute.Strategy] = connect_tpu,
    list_gpus: Callable[[], list[str]] = list_gpus,
) -> StrategyChoice:
    """Finds the strategy for the best device here, prints which it took, and returns it.

    On the JAX backend: `find_jax_strategy(device)`. On TensorFlow, in order: a TPU VM's
    TPU (`tpu="local"`); a TPU by name (`tpu_name`, else the `TPU_NAME` or
    `COLAB_TPU_ADDR` environment variable: the older resolver); all GPUs
    (`MirroredStrategy` for several, `OneDeviceStrategy` for one); else the CPU (the
    default strategy, or `MirroredStrategy` over several logical CPU devices).

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
        with choice.scope():
            model = make_model()
    """
    device = (device or os.environ.get(DEVICE_ENV_VAR) or "auto").lower()
    if device not in DEVICES:
        raise ValueError(f"`device` must be one of {DEVICES}. Received: device={device!r}")
    import keras  # Imported here: which backend it runs on is chosen before (utils.lab.runtime).

    if keras.backend.backend() == "jax":
        return find_jax_strategy(device)
    attempts = []
    if device in ("auto", "tpu"):
        name = tpu_name or os.environ.get("TPU_NAME") or os.environ.get("COLAB_TPU_ADDR")
        for tpu in ["local", name] if name else ["local"]:
            try:
                tpu_strategy = connect_tpu(tpu)
            except _TPU_ERRORS as error:
                attempts.append(
                    f"TPU {tpu!r}: {type(error).__name__}: {errors.first_line(error)[:160]}"
                )
                continue
            devices = tuple(d.name for d in tf.config.list_logical_devices("TPU"))
            return _report(StrategyChoice(tpu_strategy, "TPU", devices, tuple(attempts)))
        if not name:
            attempts.append("TPU by name: no tpu_name, $TPU_NAME or $COLAB_TPU_ADDR set")
        if device == "tpu":
            raise ValueError(
                "No TPU found (device='tpu'). "
                + "; ".join(attempts)
                + ". Run on a TPU VM (Kaggle, Google Cloud), or pass tpu_name= (or set "
                "$TPU_NAME) to a TPU's name or grpc:// address; device='auto' takes the best "
                "device here."
            )
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
            raise ValueError(
                "No GPU found (device='gpu'): TensorFlow lists no GPU device "
                "(tf.config.list_logical_devices('GPU') is empty). Choose a GPU runtime "
                "(Colab: Runtime > Change runtime type), or install TensorFlow with GPU "
                "support (Linux: pip install 'tensorflow[and-cuda]'; tensorflow-cpu has "
                "none); device='auto' takes the best device here."
            )
    cpus = tuple(d.name for d in tf.config.list_logical_devices("CPU"))
    found = tf.distribute.MirroredStrategy(cpus) if len(cpus) > 1 else tf.distribute.get_strategy()
    return _report(StrategyChoice(found, "CPU", cpus, tuple(attempts)))


def find_jax_strategy(device: str = "auto") -> StrategyChoice:
    """On the JAX backend: sets `keras.distribution.DataParallel` over the devices JAX sees.

    JAX picks its best platform itself (TPU, else GPU, else CPU); `device` forces one.

    Args:
        device: "auto" (JAX's choice), or "tpu", "gpu" or "cpu" to force one.

    Returns:
        A `StrategyChoice` with no TensorFlow strategy and the distribution set; its
        description is printed.

    Raises:
        ValueError: if a forced device is not there.
    """
    import jax
    import keras

    devices = jax.devices()
    platform = devices[0].platform
    attempts = [f"jax.devices(): {len(devices)} {platform.upper()} device(s)"]
    if device not in ("auto", platform):
        try:
            devices = jax.devices(device)
        except RuntimeError as error:
            raise ValueError(
                f"No {device.upper()} found (device={device!r}): {errors.first_line(error)[:160]}. "
                f"JAX sees {len(devices)} {platform.upper()} device(s); device='auto' takes "
                "them."
            ) from None
    distribution = keras.distribution.DataParallel(devices=devices)
    keras.distribution.set_distribution(distribution)
    names = tuple(f"{d.platform}:{d.id}" for d in devices)
    kind = devices[0].platform.upper()
    return _report(StrategyChoice(None, kind, names, tuple(attempts), distribution))


def _report(choice: StrategyChoice) -> StrategyChoice:
    print(choice.describe())
    return choice


def supported_steps_per_execution(choice: StrategyChoice, steps_per_execution: int) -> int:
    """Returns `steps_per_execution`, or 1 where Keras cannot run more (and says why).

    Keras 3 fails under TensorFlow's `MirroredStrategy` (several GPUs, or several logical
    CPUs) with `steps_per_execution` > 1: "You must feed a value for placeholder tensor"
    (keras-team/keras#19246, still open; seen here with Keras 3.15.1 and TF 2.21).

    Args:
        choice: the strategy the model trains under.
        steps_per_execution: the steps per execution asked for.

    Returns:
        `steps_per_execution`, or 1 under a `MirroredStrategy`.

    Example:
        steps = strategy.supported_steps_per_execution(choice, 16)
    """
    if steps_per_execution > 1 and isinstance(choice.strategy, tf.distribute.MirroredStrategy):
        print(
            f"steps_per_execution={steps_per_execution} fails under MirroredStrategy in "
            "Keras 3 (keras-team/keras#19246): using 1."
        )
        return 1
    return steps_per_execution
