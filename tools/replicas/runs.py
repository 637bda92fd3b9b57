"""What each replica runs, and what each run must show.

A lab runs to its first TODO (small parameters): it must stop there, at that TODO's check, with the check's
plain one-line message (`CheckFailed: TODO n (...): not done yet ...`), and at no cell
before. A solution runs end to end without an error. Small parameters are the tests' own
(`tools.lesson_parameters`); the JAX runs of lessons 4 and 5 take the lessons' defaults.
"""

from __future__ import annotations

import dataclasses

import nbformat

from tools.build_outputs import METADATA_KEY
from tools.lesson_parameters import SMALL_PARAMETERS

ALL_LESSONS = (
    "01_tf_data_basics",
    "02_write_tfrecords",
    "03_read_tfrecords",
    "04_train_keras",
    "05_accelerator_waiting",
    "06_convert_with_beam",
    "07_scale_out_reading",
    "08_where_the_time_goes",
)
SOLUTIONS = tuple(lesson for lesson in ALL_LESSONS if lesson != "06_convert_with_beam")
JAX_LESSONS = ("04_train_keras", "05_accelerator_waiting")
# On a TPU runtime the set-up's "auto" picks JAX (a TPU TensorFlow cannot use is attached);
# a replica has no TPU, so it says JAX the one other way "auto" reads.
ON_JAX = {"KERAS_BACKEND": "jax"}
EIGHT_DEVICES = {**ON_JAX, "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}


@dataclasses.dataclass(frozen=True)
class Run:
    """One notebook run in a replica: its folder's name, which notebook, with what."""

    name: str  # lab01, solution04, solution04-jax8
    lesson: str
    variant: str  # "lab" (to its first TODO) or "solution" (end to end)
    what: str  # What the table says.
    parameters: dict = dataclasses.field(default_factory=dict)
    env: dict = dataclasses.field(default_factory=dict)


def labs(lessons=ALL_LESSONS, env=None) -> list[Run]:
    return [Run(f"lab{lesson[:2]}", lesson, "lab", f"lab {lesson[:2]} to its first TODO",
                SMALL_PARAMETERS[lesson], env or {}) for lesson in lessons]  # fmt: skip


def solutions(lessons=SOLUTIONS, env=None) -> list[Run]:
    return [Run(f"solution{lesson[:2]}", lesson, "solution",
                f"solution {lesson[:2]}, small parameters", SMALL_PARAMETERS[lesson], env or {})
            for lesson in lessons]  # fmt: skip


def jax_defaults(devices: int, lessons=JAX_LESSONS) -> list[Run]:
    env = EIGHT_DEVICES if devices == 8 else ON_JAX
    words = f"JAX, {devices} device{'s' * (devices > 1)}, default parameters"
    return [Run(f"solution{lesson[:2]}-jax{devices}", lesson, "solution",
                f"solution {lesson[:2]}, {words}", {"BACKEND": "jax"}, env)
            for lesson in lessons]  # fmt: skip


PLANS = {
    "bare-jax": lambda: labs(["04_train_keras"], ON_JAX) + solutions(["04_train_keras"], ON_JAX),
    "colab-tpu": lambda: labs(env=ON_JAX) + solutions(env=ON_JAX) + jax_defaults(1),
    "colab-gpu": lambda: labs() + solutions(),
    "kaggle-tpu": lambda: labs(env=ON_JAX) + solutions(env=ON_JAX) + jax_defaults(8),
}


def first_todo(notebook: nbformat.NotebookNode) -> int:
    """Returns the number of the notebook's first TODO."""
    return min(c.metadata[METADATA_KEY]["todo"] for c in notebook.cells
               if "todo" in c.metadata.get(METADATA_KEY, {}))  # fmt: skip


def first_error(notebook: nbformat.NotebookNode) -> tuple[int, dict] | tuple[None, None]:
    """Returns (cell index, error output) of the first error in an executed notebook."""
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                return index, output
    return None, None


def verdict(run: Run, notebook: nbformat.NotebookNode) -> str | None:
    """Returns None when the executed notebook shows what `run` must, else why not (a line)."""
    index, error = first_error(notebook)
    if run.variant == "solution":
        return None if error is None else f"{error.ename}: {error.evalue}"[:300]
    todo = first_todo(notebook)
    if error is None:
        return f"ran to the end: no stop at TODO {todo}'s check"
    stopped_at = notebook.cells[index].metadata.get(METADATA_KEY, {}).get("check")
    plain = error.traceback == [f"CheckFailed: {error.evalue}"]
    if (stopped_at, error.ename, plain) != (todo, "CheckFailed", True) or not (
        error.evalue.startswith(f"TODO {todo} (") and "not done yet" in error.evalue
    ):
        return f"stopped at cell {index} (check {stopped_at}): {error.ename}: {error.evalue}"[:300]
    return None
