"""Chooses the Keras backend (TensorFlow or JAX) before TensorFlow or Keras is imported.

The set-up cell of every lab calls `prepare(BACKEND)`. Facts it builds on (TF 2.21,
Keras 3.15, JAX 0.10):
- `KERAS_BACKEND` must be set before importing tensorflow as well as keras (TensorFlow
  imports Keras); set later it is silently ignored.
- Colab's TPU runtimes ship JAX and no TensorFlow; `tensorflow-tpu` beside JAX fights over
  libtpu. There, Keras runs on JAX and `tensorflow-cpu` is installed for `tf.data` only.
- TensorFlow writes log lines to the process's stderr while it is imported (absl, oneDNN),
  whatever `TF_CPP_MIN_LOG_LEVEL` says; they are dropped here, during the import only.
- What is missing is installed with pip (`pip_install`), the set-up's only download: quiet,
  with a timeout, never waiting on input; a failure is one line (`SetupFailed`); what is
  installed keeps its version if it can (TF 2.21 pins h5py<3.15; Colab TPU has 3.16).
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import importlib.metadata
import importlib.util
import os
import platform
import re
import shlex
import site
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

BACKENDS = ("auto", "tensorflow", "jax")
# The TensorFlow installed for tf.data where it is missing: 2.21.0 (as in requirements.txt),
# else 2.20.0 (Colab's and Kaggle's own) where 2.21's pins would move an installed package.
TENSORFLOW_VERSIONS = ">=2.20.0,<=2.21.0"
# pip, quiet and never waiting on input: no colour codes, no progress bars, no version
# check, a network timeout per request and few retries; PIP_TIMEOUT_S bounds the whole run.
PIP_OPTIONS = (
    "--quiet",
    "--no-color",
    "--progress-bar",
    "off",
    "--disable-pip-version-check",
    "--timeout",
    "20",
    "--retries",
    "1",
)
PIP_TIMEOUT_S = 600
# What pip's messages say when it cannot connect to the package index.
OFFLINE_SIGNS = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
)


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


class SetupFailed(RuntimeError):
    """The set-up could not install what it needs; IPython shows the message alone.

    The message is one line: what was tried, the command to run by hand, how to go on.
    """

    def _render_traceback_(self) -> list[str]:  # IPython's hook: no traceback, one line.
        return [f"{type(self).__name__}: {self}"]


def pip_install(
    requirements: list[str],
    *,
    install: Callable[..., subprocess.CompletedProcess] = subprocess.run,
    timeout_s: float = PIP_TIMEOUT_S,
) -> None:
    """Installs `requirements` with pip, quietly, never waiting on input.

    One progress line is printed. pip runs with its stdin closed, `GIT_TERMINAL_PROMPT=0`,
    no colour, no progress bar, a network timeout and `timeout_s` in all, the installed
    versions as constraints (if none fits, without: a line names what moved). A `.pth`
    file the install adds is put into effect at once (Python reads them only at start).

    Args:
        requirements: pip requirement strings, e.g. ["tensorflow-cpu>=2.20.0,<=2.21.0"].
        install: runs the pip command (replaced in tests).
        timeout_s: seconds pip may take in all.

    Raises:
        SetupFailed: if pip fails or runs out of time; its one line says what was tried,
            the command to run by hand and how to go on.

    Example:
        runtime.pip_install(["tensorflow-cpu>=2.20.0,<=2.21.0"])
    """
    command = [sys.executable, "-m", "pip", "install", *PIP_OPTIONS, *requirements]
    names = ", ".join(requirements)
    print(f"Installing {names} with pip (at most {timeout_s / 60:.0f} min) ...", flush=True)
    before, pth_before = installed_versions(), _pth_files()
    with tempfile.TemporaryDirectory() as folder:
        pins = Path(folder, "installed.txt")
        pins.write_text("".join(f"{n}=={v}\n" for n, v in before.items()))
        why = _run_pip([*command, "-c", str(pins)], install, timeout_s)
    if why is not None and "ResolutionImpossible" in why:
        why = _run_pip(command, install, timeout_s)
    if why is not None:
        by_hand = "%pip install " + " ".join(shlex.quote(r) for r in requirements)
        raise SetupFailed(
            f"pip could not install {names} ({why}). Run by hand in a cell: {by_hand} "
            "(or pick a runtime that has them), then run this cell again."
        )
    importlib.invalidate_caches()
    after = installed_versions()
    moved = [f"{n} {v} -> {after.get(n, 'gone')}" for n, v in before.items() if after.get(n) != v]
    if moved:
        print(f"pip changed installed packages: {', '.join(moved)}.", flush=True)
    for pth in sorted(_pth_files() - pth_before):
        _add_pth_paths(pth)


def installed_versions() -> dict[str, str]:
    """Returns what is installed: the first of each name on sys.path.

    Returns:
        {distribution name: version}.
    """
    found = {}
    for dist in importlib.metadata.distributions():
        found.setdefault(dist.metadata["Name"], dist.version)
    found.pop(None, None)
    return found


def _run_pip(command: list[str], install: Callable, timeout_s: float) -> str | None:
    """Runs pip; returns None, or why it failed."""
    environment = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "PIP_NO_INPUT": "1"}
    try:
        result = install(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         env=environment, timeout=timeout_s)  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"no result within {timeout_s:.0f} s"
    return None if result.returncode == 0 else _last_error_line(result.stderr)


def _last_error_line(stderr: str) -> str:
    """Returns pip's last `ERROR:` line (else its last line), without colour codes.

    Where pip could not connect to the package index, the line says so.
    """
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in stderr.splitlines()]
    lines = [line for line in lines if line]
    errors = [line for line in lines if line.startswith("ERROR:")]
    line = (errors or lines or ["pip gave no message"])[-1]
    if any(sign in stderr for sign in OFFLINE_SIGNS):
        line += "; the package index could not be reached: is this runtime online?"
    return line


def _pth_files() -> set[Path]:
    folders = {*site.getsitepackages(), site.getusersitepackages()}
    return {pth for folder in folders for pth in Path(folder).glob("*.pth")}


def _add_pth_paths(pth: Path) -> None:
    """Adds the folders a new `.pth` file names to `sys.path`, as `site` does at start-up.

    Lines that run code (`import ...`) are left alone: they take effect in the next kernel.
    """
    for line in pth.read_text().splitlines():
        folder = Path(pth.parent, line.strip())
        if line.strip() and not line.startswith(("#", "import")) and folder.is_dir():
            if str(folder) not in sys.path:
                sys.path.append(str(folder))


def prepare(
    backend: str = "auto",
    *,
    also_install: dict[str, list[str]] | None = None,
    install: Callable[..., subprocess.CompletedProcess] = subprocess.run,
) -> Runtime:
    """Chooses the backend, installs what is missing (TensorFlow for tf.data), imports, prints.

    What is missing is installed in one quiet pip command (`pip_install`).

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
        SetupFailed: if installing what is missing fails (one line: what was tried and how
            to go on).

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
        pip_install(missing, install=install)
    with stderr_dropped():
        import tensorflow as tf
    import keras

    versions = f"TensorFlow {tf.__version__}, Keras {keras.__version__}"
    if chosen.backend == "jax":
        import jax

        versions += f" on JAX {jax.__version__} (TensorFlow for tf.data only)"
    print(f"Backend: {chosen.backend} ({chosen.reason}). {versions}; {os.cpu_count()} CPU cores.")
    return chosen
