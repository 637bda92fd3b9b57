"""Times training steps: fed by a pipeline or from memory, by batch size, by steps per call.

Lab 4 asks three questions of its trained model: does the pipeline keep up with the
training step, how does a step's cost change with the batch size, and what does
`steps_per_execution` save. Each function here times one of them on a fresh copy of the
model and returns the numbers with the lines the lesson prints.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np
import tensorflow as tf

from utils import timing

if TYPE_CHECKING:
    import keras

# The formats mixed precision chooses between, in the order the lesson prints them.
FLOAT_FORMATS = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}

# A step fed by the pipeline at most this much slower than one fed from memory keeps up.
INPUT_BOUND_TOLERANCE = 1.1


def describe_float_formats() -> list[str]:
    """Describes each float format's range and precision, and what becomes of a gradient of 1e-8.

    Returns:
        One line per format of `FLOAT_FORMATS`: its largest value, its smallest normal
        value, its significant bits, and 1e-8 as stored in it (0 where it cannot be held).
    """
    lines = []
    for name, dtype in FLOAT_FORMATS.items():
        info = ml_dtypes.finfo(dtype)
        stored = float(np.array(1e-8, dtype=dtype))
        lines.append(
            f"{name:>8}: largest {float(info.max):.1e}, smallest normal {float(info.tiny):.1e}, "
            f"{int(info.nmant) + 1} significant bits; "
            f"a gradient of 1e-8 becomes {stored:.1e}"
        )
    return lines


def compiled_copy(
    model: keras.Model, *, steps_per_execution: int, scope: AbstractContextManager | None = None
) -> keras.Model:
    """Returns a copy of `model` with its weights, compiled as `model` was.

    The copy takes `model`'s own compile arguments (optimizer settings, loss, metrics),
    with only `steps_per_execution` changed, and a fresh optimizer: timing the copy leaves
    `model` as trained.

    Args:
        model: a compiled Keras model.
        steps_per_execution: training steps per call into the compiled step function.
        scope: a context manager to create the copy's variables in (a strategy's
            `scope()`); None for none.

    Returns:
        The compiled copy.

    Raises:
        ValueError: if `model` was never compiled.
    """
    import keras  # Imported here: the float formats do not need Keras.

    config = model.get_compile_config()
    if not config:
        raise ValueError(f"`model` must be compiled before it is copied. Received: {model.name}")
    config = {**config, "steps_per_execution": steps_per_execution}
    with scope if scope is not None else contextlib.nullcontext():
        copy = keras.models.clone_model(model)
        copy.set_weights(model.get_weights())
        copy.compile_from_config(config)
    return copy


@dataclasses.dataclass(frozen=True)
class InputBound:
    """Training steps fed by the pipeline against steps fed from memory.

    Attributes:
        step_fed: seconds per step fed by the pipeline.
        step_in_memory: seconds per step fed one batch held in memory (input costs nothing).
        ratio: `step_fed / step_in_memory`.
        verdict: "not input-bound" where the ratio is at most `INPUT_BOUND_TOLERANCE`,
            else "input-bound".
    """

    step_fed: float
    step_in_memory: float
    ratio: float
    verdict: str

    def summary(self) -> str:
        """Says how the two step times compare.

        Returns:
            The two lines the lesson prints: both step times and their ratio, then the
            verdict and the share of a step that reading and decoding cost.
        """
        return (
            f"Step time: {self.step_fed * 1000:.1f} ms fed by the pipeline without cache, "
            f"{self.step_in_memory * 1000:.1f} ms with one batch in memory: "
            f"ratio {self.ratio:.2f}\n"
            f"Training here is {self.verdict}: reading and decoding cost "
            f"{max(self.ratio - 1, 0):.0%} of a step."
        )


def measure_input_bound(
    model: keras.Model, fed: tf.data.Dataset, in_memory: tf.data.Dataset, *, num_steps: int
) -> InputBound:
    """Times `model`'s training steps fed by `fed`, then by `in_memory`.

    Args:
        model: the compiled model to train (its weights change: pass a copy).
        fed: the pipeline to feed it, endless.
        in_memory: one batch repeated, endless.
        num_steps: training steps timed on each.

    Returns:
        An `InputBound`.
    """
    step_in_memory = timing.time_training_steps(model, in_memory, num_steps=num_steps)
    step_fed = timing.time_training_steps(model, fed, num_steps=num_steps)
    ratio = step_fed / step_in_memory
    verdict = "not input-bound" if ratio <= INPUT_BOUND_TOLERANCE else "input-bound"
    return InputBound(step_fed, step_in_memory, ratio, verdict)


def describe_keeps_up(
    results: list[timing.ThroughputResult], consumers: dict[str, float]
) -> list[str]:
    """Says, for each pipeline and each consumer, whether the pipeline keeps up.

    Args:
        results: `timing.ThroughputResult`s of the pipelines.
        consumers: {"<who> consumes": images/s}.

    Returns:
        One line per pipeline and consumer: the share of the consumer's need that the
        pipeline delivers, and "keeps up" or "input-bound".
    """
    lines = []
    for result in results:
        for consumer, needed in consumers.items():
            share = result.images_per_second / needed
            keeps_up = "keeps up" if share >= 1 else "input-bound"
            lines.append(
                f"{result.label}: {result.images_per_second:,.0f} images/s; {consumer} "
                f"{needed:,.0f}: {share:.2f}x, {keeps_up}"
            )
    return lines


def time_batch_sizes(
    make_model: Callable[[], keras.Model],
    example: tuple[tf.Tensor, tf.Tensor],
    *,
    batches_per_replica: list[int],
    num_replicas: int,
    num_timed_steps: int,
) -> dict[int, float]:
    """Times training steps, with data in memory, at several batch sizes per replica.

    Each batch repeats one example; the larger batches take fewer steps (at least 4), so
    that each size trains on about as many images. Prints one line per size.

    Args:
        make_model: returns a fresh compiled model (one per size).
        example: one (image, label) pair of batches; its first image and label are used.
        batches_per_replica: the images per replica to time.
        num_replicas: the replicas each batch is split over.
        num_timed_steps: steps timed at 8 images per replica (fewer for larger batches).

    Returns:
        {images per replica: seconds per step}.
    """
    seconds_per_step = {}
    for per_replica in batches_per_replica:
        size = per_replica * num_replicas
        images = tf.repeat(example[0][:1], size, axis=0)
        labels = tf.repeat(example[1][:1], size, axis=0)
        batches = tf.data.Dataset.from_tensors((images, labels)).repeat()
        num_steps = max(4, 8 * num_timed_steps // per_replica)
        seconds = timing.time_training_steps(make_model(), batches, num_steps=num_steps)
        seconds_per_step[per_replica] = seconds
        print(
            f"{per_replica:>4} images per replica: {seconds * 1000:7.1f} ms per step, "
            f"{size / seconds:8,.0f} images/s"
        )
    return seconds_per_step


def tiny_model_and_batches(
    *,
    batch_size: int,
    num_outputs: int,
    steps_per_execution: int,
    scope: AbstractContextManager | None = None,
) -> tuple[keras.Model, tf.data.Dataset]:
    """One dense layer on 8 numbers, compiled, and endless batches of zeros to train it on.

    Its training step costs almost nothing, so what a step costs is mostly the fixed cost
    of a call into the compiled step function.

    Args:
        batch_size: examples per batch (the global batch, split over the replicas).
        num_outputs: numbers per label.
        steps_per_execution: training steps per call into the compiled step function.
        scope: a context manager to create the variables in (a strategy's `scope()`).

    Returns:
        (the compiled model (SGD, mean squared error), its endless `tf.data.Dataset`).
    """
    import keras

    with scope if scope is not None else contextlib.nullcontext():
        tiny = keras.Sequential([keras.Input((8,)), keras.layers.Dense(num_outputs)])
        tiny.compile(optimizer="sgd", loss="mse", steps_per_execution=steps_per_execution)
    batches = tf.data.Dataset.from_tensors(
        (tf.zeros([batch_size, 8]), tf.zeros([batch_size, num_outputs]))
    ).repeat()
    return tiny, batches


def describe_steps_per_execution(step_times: dict[int, dict[str, float]], many: int) -> list[str]:
    """Compares seconds per step at `steps_per_execution` 1 and `many`, for each model.

    Args:
        step_times: {steps_per_execution: {model name: seconds per step}}, with keys 1
            and `many` (the same key where `many` is 1).
        many: the larger `steps_per_execution`.

    Returns:
        One line per model: both times and their ratio.
    """
    lines = []
    for name, one in step_times[1].items():
        several = step_times[many][name]
        lines.append(
            f"{name:>12}: {one * 1000:7.2f} ms per step one at a time, {several * 1000:7.2f} ms "
            f"with steps_per_execution={many}: {one / several:.2f}x"
        )
    return lines
