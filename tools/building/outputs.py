"""The solution's outputs: execute it, keep only its outputs, show no machine paths.

Steps of the build (`tools/build_notebooks.py`): `execute_solution` runs a solution with
papermill and keeps its outputs, execution counts and duration (nothing else papermill or
the kernel adds); `without_machine_paths` shows the home folder as `~` and temporary
folders as `$TMPDIR`; `strip_outputs` removes them all (a lab, and `--check`'s comparison).
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import nbformat

from tools.building import machine
from tools.building.kernels import KERNEL_OPTIONS
from tools.building.regions import BuildError
from utils.lab import progress

METADATA_KEY = "tpu_speed_pipelines"
# In a solution's metadata: how long its execution took, in seconds (the lesson times in README.md).
EXECUTION_SECONDS = "execution_seconds"
# ... and the machine it ran on, with its JPEG decode rate
# (`tools.building.machine.build_machine`): the course run scales the lesson times by it.
BUILD_MACHINE = "build_machine"
# The environment a lesson's solution is built in, where it is not the build's own: lab 4
# runs where its learners run it, Keras on JAX (Colab's and Kaggle's TPU runtimes), on one
# device as Colab's v5e-1 is. Not 8 simulated devices: at the lab's CPU batch (16 a device)
# 8 devices train on a global batch of 128, which the plan counts at 48, so the run sees
# 2.7 times the images (on 2 cores under load, 3,000 training images: 781 s and 332 s of
# CPU against 243 s and 161 s on 1 device, 2026-11-28); and under load XLA's all-reduce
# over 8 CPU devices once waited past its 40 s limit and killed the kernel.
# tests/test_lab4_devices.py trains on 8 briefly.
# XLA_FLAGS must be set before JAX starts; KERAS_BACKEND before TensorFlow is imported.
SOLUTION_ENVIRONMENTS = {
    "notebooks/04_train_keras.py": {
        "KERAS_BACKEND": "jax",
        "XLA_FLAGS": "--xla_force_host_platform_device_count=1",
    },
}


def strip_outputs(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Returns a copy with outputs, execution counts and the execution time removed."""
    stripped = copy.deepcopy(notebook)
    stripped.metadata.get(METADATA_KEY, {}).pop(EXECUTION_SECONDS, None)
    stripped.metadata.get(METADATA_KEY, {}).pop(BUILD_MACHINE, None)
    for cell in stripped.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return stripped


def execute_solution(
    notebook: nbformat.NotebookNode, *, cwd: Path, parameters: dict | None = None
) -> nbformat.NotebookNode:
    """Runs a notebook with papermill in `cwd`; returns a copy of it with the outputs.

    Only outputs, execution counts and the run's duration (papermill's, in whole seconds,
    as `tpu_speed_pipelines.execution_seconds`: README.md's lesson times; beside it
    `build_machine`, the machine's JPEG decode rate measured just before) are taken from
    the run, so the metadata papermill and the kernel add (timestamps, versions, empty
    tags) never reach the file; the outputs show machine paths portably
    (`without_machine_paths`).
    """
    import papermill

    os.environ.setdefault(progress.DISABLE_ENV_VAR, "1")
    build_machine = machine.build_machine()  # Just before the run: the machine it meets.
    source = notebook.metadata.get(METADATA_KEY, {}).get("source", "")
    with (
        tempfile.TemporaryDirectory() as scratch,
        _environment(SOLUTION_ENVIRONMENTS.get(source, {})),
    ):
        unexecuted, executed = Path(scratch) / "in.ipynb", Path(scratch) / "out.ipynb"
        nbformat.write(notebook, unexecuted)
        papermill.execute_notebook(
            str(unexecuted),
            str(executed),
            parameters=parameters or {},
            cwd=str(cwd),
            progress_bar=False,
            **KERNEL_OPTIONS,
        )
        executed_notebook = nbformat.read(executed, as_version=4)
        executed_cells = executed_notebook.cells
    result = copy.deepcopy(notebook)
    duration = executed_notebook.metadata.get("papermill", {}).get("duration")
    if duration is not None:
        result.metadata.setdefault(METADATA_KEY, {})[EXECUTION_SECONDS] = round(duration)
        result.metadata[METADATA_KEY][BUILD_MACHINE] = build_machine
    if len(executed_cells) != len(result.cells):
        raise BuildError("papermill added cells; build solutions with their default parameters.")
    for cell, executed_cell in zip(result.cells, executed_cells, strict=True):
        if cell.cell_type == "code":
            cell.outputs = without_machine_paths(executed_cell.outputs)
            cell.execution_count = executed_cell.execution_count
    return result


@contextlib.contextmanager
def _environment(variables: dict[str, str]) -> Iterator[None]:
    """Sets `variables` in os.environ (which the kernel inherits) for the block, then restores."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def without_machine_paths(outputs: list, home: Path | None = None) -> list:
    """Returns `outputs` with the home folder shown as `~` and temporary folders as `$TMPDIR`.

    A committed solution then prints `~/.cache/tpu_speed_pipelines/...`, as the README
    names the cache, and `$TMPDIR/...` for a folder made by `tempfile`, rather than the
    paths of the machine that built it.
    """
    home_prefix = str(home or Path.home()).rstrip("/") + "/"
    # A folder `tempfile` made: its prefix ("tmp" or the lesson's own), then 8 random
    # characters; whatever it is called, it is the machine's, not the reader's.
    temporary = re.compile(re.escape(tempfile.gettempdir().rstrip("/")) + r"/[\w.-]*[a-z0-9_]{8}/")

    def portable(text: str) -> str:
        return temporary.sub("$TMPDIR/", text.replace(home_prefix, "~/"))

    outputs = copy.deepcopy(outputs)
    for output in outputs:
        if "text" in output:
            output["text"] = portable(output["text"])
        for kind, value in output.get("data", {}).items():
            if kind.startswith("text/") and isinstance(value, str):
                output["data"][kind] = portable(value)
    return outputs
