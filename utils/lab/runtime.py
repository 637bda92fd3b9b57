"""Chooses the Keras backend (TensorFlow or JAX) before TensorFlow or Keras is imported.

The set-up cell of every lab calls `prepare(BACKEND)`. Facts it builds on (TF 2.21,
Keras 3.15, JAX 0.10):
- `KERAS_BACKEND` must be set before importing tensorflow as well as keras (TensorFlow
  imports Keras); set later it is silently ignored.
- Colab's TPU runtimes ship JAX and no TensorFlow; `tensorflow-tpu` beside JAX fights over
  libtpu. There, Keras runs on JAX and `tensorflow-cpu` is installed for `tf.data` only.
- TensorFlow writes log lines to the process's stderr while it is imported (absl, oneDNN),
  whatever `TF_CPP_MIN_LOG_LEVEL` says, and its CUDA build, on a machine without a GPU
  (Colab's CPU runtime), an error line "failed call to cuInit" as it first looks for
  devices; both are dropped here, during the import and that first look only.
- What is missing is installed with pip (`packages.pip_install`), the set-up's only
  download: quiet, with a timeout, never waiting on input; a failure is one line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import importlib.metadata
import importlib.util
import os
import platform
import subprocess
import sys
from collections.abc import Callable, Iterator

from utils.lab import packages

BACKENDS = ("auto", "tensorflow", "jax")
# The TensorFlow installed for tf.data where it is missing: 2.21.0 (as in requirements.txt),
# else 2.20.0 (Colab's and Kaggle's own) where 2.21's pins would move an installed package.
TENSORFLOW_VERSIONS = ">=2.20.0,<=2.21.0"


@dataclasses.dataclass(frozen=True)
class Runtime:
    """What `prepare` chose: `backend` ("tensorflow" or "jax") and why."""

    backend: str
    reason: str


def tensorflow_requirement() -> str:
    """Returns the pip requirement for TensorFlow here: the CPU build where it exists.

    Returns:
        "tensorflow-cpu<TENSORFLOW_VERSIONS>" on Linux x86_64 before Python 3.14, else
        "tensorflow<TENSORFLOW_VERSIONS>".
    """
    cpu_build = (
        sys.platform == "linux" and platform.machine() == "x86_64" and sys.version_info < (3, 14)
    )
    name = "tensorflow-cpu" if cpu_build else "tensorflow"
    return f"{name}{TENSORFLOW_VERSIONS}"


def attached_tpu() -> str | None:
    """Looks for an attached TPU (TPU VMs) by its device files; initializes nothing.

    Returns:
        The first device file (/dev/accel0 or /dev/vfio/0 ...), or None without a TPU.
    """
    found = sorted(glob.glob("/dev/accel[0-9]*") + glob.glob("/dev/vfio/[0-9]*"))
    return found[0] if found else None


def unused_gpu_notice(backend: str, count_gpus: Callable[[], int]) -> str | None:
    """Says when an NVIDIA GPU is here but the backend's framework sees none.

    A CPU build of TensorFlow (`tensorflow-cpu`, what the course installs on Linux x86_64)
    or of JAX trains on the CPU beside a GPU without a word: seen on an H200 machine, where
    lab 4 on TensorFlow trained on 1 CPU device while JAX on CUDA used the GPU.

    Args:
        backend: "tensorflow" or "jax", the backend Keras runs on.
        count_gpus: counts the GPUs that backend's framework sees; called only where an
            NVIDIA driver is (on a TPU VM, JAX would otherwise take the TPU from another
            kernel).

    Returns:
        One line saying how to use the GPU, or None (no NVIDIA driver, or a GPU seen).
    """
    has_driver = os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidia0")
    if not has_driver or count_gpus():
        return None
    if backend == "jax":
        return (
            "An NVIDIA GPU is here, but this JAX sees none (a CPU build): Keras trains on the "
            "CPU. For the GPU: pip install 'jax[cuda12]', then restart the kernel."
        )
    return (
        "An NVIDIA GPU is here, but this TensorFlow sees none (a CPU build, tensorflow-cpu): "
        "Keras trains on the CPU. For the GPU: pip install 'tensorflow[and-cuda]' and restart "
        'the kernel, or set BACKEND = "jax" with a JAX that has CUDA.'
    )


def _visible_gpus(backend: str) -> int:
    """The GPUs the backend's framework sees (JAX's devices, or TensorFlow's)."""
    if backend == "jax":
        import jax

        return len([device for device in jax.devices() if device.platform == "gpu"])
    import tensorflow as tf

    return len(tf.config.list_physical_devices("GPU"))


def _installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def choose_backend(backend: str = "auto") -> Runtime:
    """Returns the backend to use and why, without importing TensorFlow, Keras or JAX.

    "auto": `$KERAS_BACKEND` if it is set; else JAX when a TPU is attached that TensorFlow
    cannot use (no `tensorflow-tpu` installed, as on Colab's TPU runtime) and JAX is
    installed; else TensorFlow.

    Args:
        backend: "auto", "tensorflow" or "jax" (the lab's BACKEND parameter).

    Returns:
        The `Runtime`: the backend and a reason to print.

    Raises:
        ValueError: if `backend` is not one of BACKENDS.
    """
    if backend not in BACKENDS:
        raise ValueError(f"`BACKEND` must be one of {BACKENDS}. Received: BACKEND={backend!r}")
    if backend != "auto":
        return Runtime(backend, f"BACKEND={backend!r}")
    if os.environ.get("KERAS_BACKEND") in ("tensorflow", "jax"):
        chosen = os.environ["KERAS_BACKEND"]
        return Runtime(chosen, f"auto: KERAS_BACKEND={chosen} is set")
    tpu = attached_tpu()
    has_jax = importlib.util.find_spec("jax") is not None
    if tpu and has_jax and not _installed("tensorflow-tpu"):
        return Runtime(
            "jax",
            f"auto: a TPU is attached ({tpu}), JAX is installed and "
            "TensorFlow has no TPU support here",
        )
    if tpu:
        return Runtime("tensorflow", f"auto: a TPU is attached ({tpu}) and TensorFlow can use it")
    return Runtime("tensorflow", "auto: no TPU attached")


@contextlib.contextmanager
def stderr_dropped() -> Iterator[None]:
    """Drops what is written to the process's stderr (file descriptor 2) meanwhile.

    Yields:
        Nothing: the `with` block runs with file descriptor 2 on /dev/null.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def prepare(
    backend: str = "auto",
    *,
    also_install: dict[str, list[str]] | None = None,
    install: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> Runtime:
    """Chooses the backend, installs what is missing (TensorFlow for tf.data), imports, prints.

    What is missing is installed in one quiet pip command (`packages.pip_install`).

    Args:
        backend: "auto", "tensorflow" or "jax" (the lab's BACKEND parameter).
        also_install: modules a lesson needs beyond TensorFlow, each with the pip
            requirements that provide it, installed where the module is missing; e.g.
            {"apache_beam": ["apache-beam[tfrecord]==2.77.0"]}.
        install: runs a pip command (replaced in tests).

    Returns:
        The `Runtime` chosen; one line says which backend, its version, and why.

    Raises:
        ValueError: if `backend` is unknown, JAX is asked for and not installed, or Keras
            was already imported with another backend (restart the kernel).
        packages.SetupFailed: if installing what is missing fails (one line: what was tried
            and how to go on).

    Example:
        runtime.prepare("auto")
    """
    chosen = choose_backend(backend)
    if chosen.backend == "jax" and importlib.util.find_spec("jax") is None:
        raise ValueError(
            "BACKEND='jax' but JAX is not installed here. Install it (pip install 'jax[cpu]', "
            "or jax[tpu] on a TPU VM), or set BACKEND='tensorflow'."
        )
    keras_module = sys.modules.get("keras")
    if keras_module is not None and keras_module.backend.backend() != chosen.backend:
        raise ValueError(
            f"Keras is already running on {keras_module.backend.backend()} in this kernel; "
            f"{chosen.backend} needs a fresh one. Restart the kernel, then run this cell first."
        )
    os.environ["KERAS_BACKEND"] = chosen.backend
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's C++ INFO and WARNING.
    wanted = {"tensorflow": [tensorflow_requirement()], **(also_install or {})}
    missing = [
        requirement
        for module, requirements in wanted.items()
        if importlib.util.find_spec(module) is None
        for requirement in requirements
    ]
    if missing:
        packages.pip_install(missing, install=install)
    with stderr_dropped():
        import tensorflow as tf

        tf.config.list_physical_devices()  # Where a CUDA build without a GPU logs cuInit.
    import keras

    versions = f"TensorFlow {tf.__version__}, Keras {keras.__version__}"
    if chosen.backend == "jax":
        import jax

        versions += f" on JAX {jax.__version__} (TensorFlow for tf.data only)"
    print(f"Backend: {chosen.backend} ({chosen.reason}). {versions}; {os.cpu_count()} CPU cores.")
    if notice := unused_gpu_notice(chosen.backend, lambda: _visible_gpus(chosen.backend)):
        print(notice)
    return chosen
