"""What a training step costs: fed from memory or a pipeline, by batch size, by steps per call.

Lesson 5 asks three questions of a training step: does the pipeline keep up with it
(`accelerator_wait`), how does its cost change with the batch size, and what does
`steps_per_execution` save. The functions here make what `comparison.measure_in_turns`
times, and the lines the lesson prints.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from utils import comparison, timing

if TYPE_CHECKING:
    import keras


def training_rate(
    model: keras.Model, dataset: tf.data.Dataset, *, num_steps: int, batch_size: int
) -> Callable[[], float]:
    """Returns a function that trains `model` on `dataset` and returns the images/s it took.

    The function is a candidate for `comparison.measure_in_turns`: each call fits two epochs
    of `num_steps` steps and times the second (`timing.time_training_steps`).

    Args:
        model: the compiled model to train (its weights change: not the one you keep).
        dataset: endless batches of `batch_size` images.
        num_steps: steps timed per call.
        batch_size: images per batch (the global batch).

    Returns:
        A function of no arguments returning images/s.

    Example:
        runs = comparison.measure_in_turns({"from memory": step_costs.training_rate(
            model, in_memory, num_steps=32, batch_size=32)}, repeats=5)
    """

    def images_per_second() -> float:
        return batch_size / timing.time_training_steps(model, dataset, num_steps=num_steps)

    return images_per_second


def describe_comparison(
    candidate: comparison.RepeatedResult, baseline: comparison.RepeatedResult, verdict: str
) -> str:
    """Says how two settings measured in turns compare, and the verdict.

    Args:
        candidate: the runs of the setting judged (images/s).
        baseline: the runs it is compared with.
        verdict: what the lesson's `verdict()` (`comparison.verdict`'s rule) said.

    Returns:
        `candidate against baseline: <ratio>x (medians ...; ranges ... over N rounds in
        turns): verdict.`

    Example:
        print(step_costs.describe_comparison(fed, in_memory, "input-bound"))
    """
    ratio = candidate.median / baseline.median
    return (
        f"{candidate.label} against {baseline.label}: {ratio:.2f}x (medians "
        f"{candidate.median:,.0f} and {baseline.median:,.0f} images/s; ranges "
        f"{candidate.minimum:,.0f}-{candidate.maximum:,.0f} and {baseline.minimum:,.0f}-"
        f"{baseline.maximum:,.0f} over {candidate.num_runs} rounds in turns): {verdict}."
    )


def batch_size_rates(
    make_model: Callable[[], keras.Model],
    example: tuple[tf.Tensor, tf.Tensor],
    *,
    batches_per_replica: list[int],
    num_replicas: int,
    num_timed_steps: int,
) -> dict[str, Callable[[], float]]:
    """Candidates for `comparison.measure_in_turns`: training images/s at each batch per replica.

    Each batch repeats one example, in memory; the larger batches take fewer steps (at
    least 4), so that each size trains on about as many images. One model per size.

    Args:
        make_model: returns a fresh compiled model.
        example: one (images, labels) batch; its first image and label are used.
        batches_per_replica: the images per replica to time.
        num_replicas: the replicas each batch is split over.
        num_timed_steps: steps timed at 8 images per replica (fewer for larger batches).

    Returns:
        {"N per replica": a function of no arguments returning images/s}.

    Example:
        runs = comparison.measure_in_turns(step_costs.batch_size_rates(
            make_model, batch, batches_per_replica=[8, 128], num_replicas=1,
            num_timed_steps=32), repeats=5)
    """
    rates = {}
    for per_replica in batches_per_replica:
        size = per_replica * num_replicas
        images = tf.repeat(example[0][:1], size, axis=0)
        labels = tf.repeat(example[1][:1], size, axis=0)
        batches = tf.data.Dataset.from_tensors((images, labels)).repeat()
        num_steps = max(4, 8 * num_timed_steps // per_replica)
        rates[f"{per_replica} per replica"] = training_rate(
            make_model(), batches, num_steps=num_steps, batch_size=size
        )
    return rates


def _padded(size: int, tile: int) -> int:
    return -(-size // tile) * tile


def describe_matrix_shapes(
    model: keras.Model, *, batch_per_replica: int, mxu_size: int = 128
) -> list[str]:
    """Says the matrix multiply each Conv2D and Dense layer makes, and how full it keeps the MXU.

    A convolution is a matrix multiply whose rows are batch x height x width (one per
    output pixel), whose depth is kernel height x width x input channels, and whose width
    is its filters; a dense layer's rows are the batch alone. XLA pads arrays to tiles of
    8 x 128: the rows to a multiple of 8, the depth and the width to multiples of 128. The
    weights (depth x width) sit on the MXU's `mxu_size` x `mxu_size` grid, so the share of
    it in use is the depth's share times the width's.

    Args:
        model: a built Keras model.
        batch_per_replica: the images each replica takes.
        mxu_size: the MXU's side (128 on v5e, 256 on v6e).

    Returns:
        One line per layer: rows, depth and width, each with the size it is padded to and
        the share of it used, and the share of the MXU in use.

    Example:
        print("\n".join(step_costs.describe_matrix_shapes(model, batch_per_replica=16)))
    """
    lines = []
    for layer in model.layers:
        if layer.__class__.__name__ not in ("Conv2D", "Dense"):
            continue
        depth, width = int(np.prod(layer.kernel.shape[:-1])), int(layer.kernel.shape[-1])
        pixels = [int(size) for size in layer.output.shape[1:-1]]
        rows = " x ".join(str(size) for size in [batch_per_replica, *pixels])
        num_rows = batch_per_replica * int(np.prod(pixels, dtype=int))
        sides = {
            "rows": (num_rows, _padded(num_rows, 8)),
            "depth": (depth, _padded(depth, mxu_size)),
            "width": (width, _padded(width, mxu_size)),
        }
        used = {name: size / padded for name, (size, padded) in sides.items()}
        lines.append(
            f"{layer.name:>8}: rows {rows} = {num_rows:,} ({used['rows']:.0%} of "
            f"{sides['rows'][1]:,}); depth {depth:,} ({used['depth']:.0%} of "
            f"{sides['depth'][1]:,}) x width {width:,} ({used['width']:.0%} of "
            f"{sides['width'][1]:,}): {used['depth'] * used['width']:.0%} of the MXU"
        )
    return lines


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
