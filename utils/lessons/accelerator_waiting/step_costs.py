"""A training step's rate, fed from memory or by a feed, and how two rates compare.

Lesson 5 asks of lab 4's model on the learner's device what it asks of the stand-in
accelerator (`accelerator_wait`): does the feed keep up? `training_rate` makes what
`comparison.measure_in_turns` times; `describe_comparison` the line the lesson prints.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

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
        verdict: what `comparison.verdict` said.

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
