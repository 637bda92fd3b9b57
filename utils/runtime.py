"""Chooses the Keras backend (TensorFlow or JAX) before TensorFlow or Keras is imported.

The set-up cell of every lab calls `prepare(BACKEND)`. Facts it builds on (TF 2.21,
Keras 3.15, JAX 0.10):
- `KERAS_BACKEND` must be set before importing tensorflow as well as keras (TensorFlow
  imports Keras); set later it is silently ignored.
- Colab's TPU runtimes ship JAX and no TensorFlow; `tensorflow-tpu` beside JAX fights over
  libtpu. There, Keras runs on JAX and `tensorflow-cpu` is installed for `tf.data` only.
- TensorFlow writes log lines to the process's stderr while it is imported (absl, oneDNN),
  whatever `TF_CPP_MIN_LOG_LEVEL` says; they are dropped here, during the import only.
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
from collections.abc import Callable

BACKENDS = ("auto", "tensorflow", "jax")
# The TensorFlow installed for tf.data where it is missing (as in requirements.txt).
TENSORFLOW_VERSION = "2.21.0"


@dataclasses.dataclass(frozen=True)
class Runtime:
    """What `prepare` chose: `backend` ("tensorflow" or "jax") and why."""

    backend: str
    reason: str


def tensorflow_requirement() -> str:
    """Returns the pip requirement for TensorFlow here: the CPU build where it exists.

    Returns:
        "tensorflow-cpu==<version>" on Linux x86_64 before Python 3.14, else
        "tensorflow==<version>".
    """
    cpu_build = (
        sys.platform == "linux" and platform.machine() == "x86_64" and sys.version_info < (3, 14)
    )
    name = "tensorflow-cpu" if cpu_build else "tensorflow"
    return f"{name}=={TENSORFLOW_VERSION}"


def attached_tpu() -> str | None:
    """Looks for an attached TPU (TPU VMs) by its device files; initializes nothing.

    Returns:
        The first device file (/dev/accel0 or /dev/vfio/0 ...), or None without a TPU.
    """
    found = sorted(glob.glob("/dev/accel[0-9]*") + glob.glob("/dev/vfio/[0-9]*"))
    return found[0] if found else None


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
        return Runtime("jax", f"auto: a TPU is attached ({tpu}), JAX is installed and "
                       "TensorFlow has no TPU support here")  # fmt: skip
    if tpu:
        return Runtime("tensorflow", f"auto: a TPU is attached ({tpu}) and TensorFlow can use it")
    return Runtime("tensorflow", "auto: no TPU attached")


@contextlib.contextmanager
def _stderr_dropped():
    """Drops what is written to the process's stderr (file descriptor 2) meanwhile."""
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
    install: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> Runtime:
    """Chooses the backend, installs TensorFlow for tf.data if missing, imports both, prints.

    Args:
        backend: "auto", "tensorflow" or "jax" (the lab's BACKEND parameter).
        install: runs a pip command (replaced in tests).

    Returns:
        The `Runtime` chosen; one line says which backend, its version, and why.

    Raises:
        ValueError: if `backend` is unknown, JAX is asked for and not installed, or Keras
            was already imported with another backend (restart the kernel).
        RuntimeError: if installing TensorFlow fails (pip's error is in the message).

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
    if importlib.util.find_spec("tensorflow") is None:
        requirement = tensorflow_requirement()
        print(f"Installing {requirement} for tf.data (about a minute) ...", flush=True)
        command = [sys.executable, "-m", "pip", "install", "-q", requirement]
        result = install(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(
                f"`{' '.join(command)}` failed:\n{result.stderr[-1500:]}\n"
                f"Install TensorFlow yourself ({requirement}), then run this cell again."
            )
        importlib.invalidate_caches()
    with _stderr_dropped():
        import tensorflow as tf
    import keras

    versions = f"TensorFlow {tf.__version__}, Keras {keras.__version__}"
    if chosen.backend == "jax":
        import jax

        versions += f" on JAX {jax.__version__} (TensorFlow for tf.data only)"
    print(f"Backend: {chosen.backend} ({chosen.reason}). {versions}; {os.cpu_count()} CPU cores.")
    return chosen
