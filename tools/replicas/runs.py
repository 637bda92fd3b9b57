"""What each replica runs, and what each run must show.

A lab runs to its first TODO: it must stop there, at that TODO's check, with the check's
plain one-line message (`CheckFailed: TODO n (...): not done yet ...`), and at no cell
before. A solution runs end to end without an error. Small parameters are the tests' own
(`tools.building.lesson_parameters`); the JAX runs of lesson 4 take the lesson's defaults.
"""

from __future__ import annotations

import dataclasses

import nbformat

from tools.building.lesson_parameters import SMALL_PARAMETERS
from tools.building.outputs import METADATA_KEY
from tools.building.variants import REPO_ROOT

NOTEBOOKS = REPO_ROOT / "notebooks"
ALL_LESSONS = tuple(path.stem for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py")))
OPTIONAL = ("06_convert_with_beam", "09_grain_arrayrecord")  # Beam's and Grain's lessons.
SOLUTIONS = tuple(lesson for lesson in ALL_LESSONS if lesson not in OPTIONAL)
JAX_LESSONS = ("04_train_keras",)  # Lesson 5 trains no model: it is a tf.data lesson.
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
    return [
        Run(
            f"lab{lesson[:2]}",
            lesson,
            "lab",
            f"lab {lesson[:2]} to its first TODO",
            SMALL_PARAMETERS[lesson],
            env or {},
        )
        for lesson in lessons
    ]


def solutions(lessons=SOLUTIONS, env=None) -> list[Run]:
    return [
        Run(
            f"solution{lesson[:2]}",
            lesson,
            "solution",
            f"solution {lesson[:2]}, small parameters",
            SMALL_PARAMETERS[lesson],
            env or {},
        )
        for lesson in lessons
    ]


def jax_runs(devices: int, defaults=JAX_LESSONS, small=()) -> list[Run]:
    """Lesson 4 on JAX over `devices` devices: `defaults` with the lessons' default
    parameters (their data made once into a cache kept across runs: DATA_CACHE), `small`
    with the small ones."""
    env = EIGHT_DEVICES if devices == 8 else ON_JAX
    words = f"JAX, {devices} device{'s' * (devices > 1)}"
    return [
        *(
            Run(
                f"solution{lesson[:2]}-jax{devices}",
                lesson,
                "solution",
                f"solution {lesson[:2]}, {words}, default parameters",
                {"BACKEND": "jax"},
                {**env, DATA_CACHE: ""},
            )
            for lesson in defaults
        ),
        *(
            Run(
                f"solution{lesson[:2]}-jax{devices}-small",
                lesson,
                "solution",
                f"solution {lesson[:2]}, {words}, small parameters",
                {**SMALL_PARAMETERS[lesson], "BACKEND": "jax"},
                env,
            )
            for lesson in small
        ),
    ]


# A run whose env names it ("") gets the course's data cache (the embedded dataset and its
# shards) in a folder beside the venvs (execute.py): the default-parameter runs do not make
# 3,670 images and their shards anew on every CI run. The labs' runs make theirs, HOME empty.
DATA_CACHE = "TPU_SPEED_PIPELINES_CACHE"
TF_LESSONS = (
    "01_tf_data_basics",
    "02_write_tfrecords",
    "03_read_tfrecords",
    "05_accelerator_waiting",
    "07_scale_out_reading",
    "08_where_the_time_goes",
)
BARE = ["04_train_keras"]
# `python -m tools.replicas --full`: all the issue asks, in every replica (more than an hour
# on 2 cores). Lab 6 installs Apache Beam from the package index.
FULL_PLANS = {
    "bare-jax": lambda: labs(BARE, ON_JAX) + solutions(BARE, ON_JAX),
    "colab-gpu": lambda: labs() + solutions(),
    "colab-tpu": lambda: labs(env=ON_JAX) + solutions(env=ON_JAX) + jax_runs(1),
    "kaggle-tpu": lambda: labs(env=ON_JAX) + solutions(env=ON_JAX) + jax_runs(8),
}
# `python -m tools.replicas` (CI): cut to fit the 50 minutes for the whole CI run on
# 2 cores (the README's tests take about 20, the venvs' cold builds about 15); each replica
# runs what is its own. colab-tpu (no TensorFlow: the set-up installs it; Python 3.13, JAX,
# Grain): the labs to their first TODO, lesson 4 on 1 JAX device. kaggle-tpu (Python
# 3.12, numpy 2.5, Keras 3.15): the tf.data lessons' solutions, lesson 4 on 8 JAX
# devices. colab-gpu: the solutions on TensorFlow 2.20. Lesson 4 runs small here: at
# their defaults lesson 4 took 13 minutes on 1 device and 22-40 on 8 (docs/lessons.md), so
# the default-parameter runs are `--full`'s; no lab 6 (Beam's install).
PLANS = {
    "bare-jax": FULL_PLANS["bare-jax"],
    "colab-gpu": lambda: solutions(TF_LESSONS + ("04_train_keras",)),
    "colab-tpu": lambda: (  # Colab ships Grain: lab 9 too.
        labs(SOLUTIONS + OPTIONAL[1:], ON_JAX) + jax_runs(1, (), JAX_LESSONS)
    ),
    "kaggle-tpu": lambda: (
        labs(["01_tf_data_basics"], ON_JAX)
        + solutions(TF_LESSONS, ON_JAX)
        + jax_runs(8, (), JAX_LESSONS)
    ),
}


# Each core lab graded by `tools.grade` in the replicas with TensorFlow: its solution must
# score full marks and its blank lab zero, with the grader's kernels and judge on the
# replica's TensorFlow and Keras (`execute.grade_replica`), so that an upgrade that breaks
# the grader fails here rather than turning a lab into "no verdict". CI grades them on
# colab-gpu (TensorFlow 2.20, Keras 3.13); `--full` on kaggle-tpu too (Keras 3.15). Where a
# replica has TensorFlow, `internals_check.py` runs there first (`execute.internals_rows`).
CORE = tuple(lesson for lesson in ALL_LESSONS if lesson[:2] <= "05")
GRADED = {"colab-gpu": CORE}
FULL_GRADED = {"colab-gpu": CORE, "kaggle-tpu": CORE}


def first_todo(notebook: nbformat.NotebookNode) -> int:
    """Returns the number of the notebook's first TODO."""
    return min(
        c.metadata[METADATA_KEY]["todo"]
        for c in notebook.cells
        if "todo" in c.metadata.get(METADATA_KEY, {})
    )


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
