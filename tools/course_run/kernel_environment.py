"""The course run's environment for its kernels: their own temporary folder, variables set."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def environment(name: str, value: str) -> Iterator[None]:
    """Sets the environment variable `name` to `value` for a while, then puts it back."""
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            del os.environ[name]
        else:
            os.environ[name] = previous


@contextlib.contextmanager
def kernels_temporary_folder() -> Iterator[Path]:
    """Points TMPDIR (the kernels' and this process's), Jupyter's runtime folder and IPython's
    profile folder at a new folder; removes it at the end, so the run leaves nothing in HOME.

    A SIGTERM (`timeout`, a CI job cancelled) ends the run like Ctrl-C does, so that the
    kernel is shut down and the folder removed then too.
    """
    previous_tempdir = tempfile.tempdir
    try:
        previous_handler = signal.signal(signal.SIGTERM, _interrupt)
    except ValueError:  # Not the main thread: leave SIGTERM alone.
        previous_handler = None
    with (
        tempfile.TemporaryDirectory(prefix="tpu_speed_pipelines_course-") as folder,
        environment("TMPDIR", folder),
        # What Jupyter and IPython would leave in HOME: the kernels' connection files
        # (~/.local/share/jupyter/runtime) and IPython's profile (~/.ipython).
        environment("JUPYTER_RUNTIME_DIR", str(Path(folder, "jupyter_runtime"))),
        environment("IPYTHONDIR", str(Path(folder, "ipython"))),
    ):
        tempfile.tempdir = folder
        try:
            yield Path(folder)
        finally:
            tempfile.tempdir = previous_tempdir
            if previous_handler is not None:
                signal.signal(signal.SIGTERM, previous_handler)


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")
