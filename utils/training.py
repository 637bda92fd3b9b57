"""How long to train, in optimizer steps, the learning rate at each step, and the curves drawn.

The length is set in images seen, not in epochs: at one batch size an epoch is many steps,
at eight replicas' global batch it can be two. Planned in images, 1, 2 and 8 replicas all
train on as many images, in as many steps as their global batch allows (up to a critical
batch size).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import keras
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from utils import arguments

if TYPE_CHECKING:
    import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class TrainingPlan:
    """A training's length in optimizer steps, cut into `epochs` for `fit()`.

    Attributes:
        global_batch_size: images per optimizer step, over all replicas.
        epochs: `fit()`'s epochs: the validation set is evaluated after each.
        steps_per_epoch: optimizer steps per epoch, a multiple of `steps_per_execution`.
        steps_per_execution: steps per call into the compiled function; never above
            `steps_per_epoch`.
        warmup_steps: steps over which the learning rate rises from 0 to its peak.
    """

    global_batch_size: int
    epochs: int
    steps_per_epoch: int
    steps_per_execution: int
    warmup_steps: int

    @property
    def total_steps(self) -> int:
        """Optimizer steps in all."""
        return self.epochs * self.steps_per_epoch

    @property
    def images_seen(self) -> int:
        """Images the optimizer sees in all (an image seen twice counts twice)."""
        return self.total_steps * self.global_batch_size

    def describe(self) -> str:
        """Says the plan in one line.

        Returns:
            "Training: N steps of B images (I images seen), E epochs of S steps, warm-up W
            steps, steps_per_execution X".
        """
        return (
            f"Training: {self.total_steps} steps of {self.global_batch_size} images "
            f"({self.images_seen:,} images seen), {self.epochs} epochs of "
            f"{self.steps_per_epoch} steps, warm-up {self.warmup_steps} steps, "
            f"steps_per_execution {self.steps_per_execution}"
        )


def plan_training(
    *,
    training_images: int,
    global_batch_size: int,
    epochs: int,
    steps_per_execution: int = 1,
    warmup_fraction: float = 0.1,
    critical_batch_size: int | None = None,
) -> TrainingPlan:
    """Plans `training_images` images seen as optimizer steps of `global_batch_size`.

    Past the critical batch size a larger batch no longer cuts the steps a model needs
    (McCandlish et al. 2018): the steps are `training_images / min(global_batch_size,
    critical_batch_size)`, so a larger batch sees more images.

    The steps are cut into `epochs` (evaluations), each a whole number of executions: each
    epoch is rounded up to a multiple of `steps_per_execution`, which is capped to the
    steps of an epoch (Keras runs every call's steps in full, past the end of an epoch).

    Args:
        training_images: images the optimizer should see in all.
        global_batch_size: images per step, over all replicas.
        epochs: how many times to evaluate on the validation set.
        steps_per_execution: steps per call into the compiled function, asked for.
        warmup_fraction: the share of the steps that warm the learning rate up, 0 to 1.
        critical_batch_size: the largest batch that still cuts the steps; None: no limit.

    Returns:
        The `TrainingPlan`, at least one step per epoch.

    Raises:
        ValueError: naming the argument, if a count is not a positive integer or
            `warmup_fraction` is outside 0 to 1.

    Example:
        plan = training.plan_training(training_images=12_000, global_batch_size=128,
                                      epochs=6, steps_per_execution=16)
    """
    for name, value in [
        ("training_images", training_images),
        ("global_batch_size", global_batch_size),
        ("epochs", epochs),
        ("steps_per_execution", steps_per_execution),
        (
            "critical_batch_size",
            global_batch_size if critical_batch_size is None else critical_batch_size,
        ),
    ]:
        arguments.check_integer(name, value, 1)
    if not 0 <= warmup_fraction < 1:
        raise ValueError(
            f"`warmup_fraction` must be at least 0 and below 1. Received: "
            f"warmup_fraction={warmup_fraction!r}"
        )
    counted_batch = min(global_batch_size, critical_batch_size or global_batch_size)
    steps = math.ceil(training_images / counted_batch / epochs)
    executed = min(steps_per_execution, steps)
    steps_per_epoch = math.ceil(steps / executed) * executed
    warmup_steps = round(warmup_fraction * epochs * steps_per_epoch)
    return TrainingPlan(global_batch_size, epochs, steps_per_epoch, executed, warmup_steps)


def warmup_cosine(
    peak_learning_rate: float, plan: TrainingPlan
) -> keras.optimizers.schedules.CosineDecay:
    """The learning rate per step: from 0 up to `peak_learning_rate`, then a cosine down to 0.

    A Keras schedule object (Keras's own `CosineDecay` with its warm-up): the optimizer
    asks it for the rate at every step, and it is saved with the model.

    Args:
        peak_learning_rate: the rate at the end of the warm-up.
        plan: the training's steps (`plan_training`).

    Returns:
        A `keras.optimizers.schedules.CosineDecay`.

    Example:
        optimizer = keras.optimizers.Adam(training.warmup_cosine(0.002, plan))
    """
    return keras.optimizers.schedules.CosineDecay(
        initial_learning_rate=0.0,
        decay_steps=max(plan.total_steps - plan.warmup_steps, 1),
        warmup_target=peak_learning_rate,
        warmup_steps=plan.warmup_steps,
    )


class LearningRateLog(keras.callbacks.Callback):
    """Adds the optimizer's learning rate at the end of each epoch to the logs.

    `fit()`'s history then holds it under `"learning_rate"`, as Keras's own learning-rate
    callbacks name it.

    Example:
        history = model.fit(..., callbacks=[training.LearningRateLog()])
        history.history["learning_rate"]
    """

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        """Puts the rate the optimizer will use next into `logs["learning_rate"]`.

        Args:
            epoch: the epoch's index (unused).
            logs: the epoch's logs, which `History` records after this callback.
        """
        if logs is not None:
            rate = self.model.optimizer.learning_rate
            logs["learning_rate"] = float(keras.ops.convert_to_numpy(rate))


ANSWERS_KEY = "val_answers_right"  # Where `ValidationAnswers` puts its share in the history.


class ValidationAnswers(keras.callbacks.Callback):
    """Counts, at each epoch's end, the share of validation images the model answers right.

    The model's own answers (the model called on each batch, the most likely class) against
    the labels, image by image: one number on any device. A plain call, not `predict()`:
    under a `MirroredStrategy` of 8 CPU replicas `predict()` from this callback hung once
    in its replicas' collective ops (the test of 8 TensorFlow replicas, 2 busy cores), and
    on JAX it wants a batch its devices divide. Keras's accuracy metric is not that on several
    TensorFlow replicas (on 8 CPU replicas it printed 0.42 where the answers were right for
    0.79 of the images, the same weights). `fit()`'s history holds the share under
    `ANSWERS_KEY`; `labels` holds the validation labels, in the order read.

    Args:
        validation: a finite dataset of (images, one-hot labels) batches, read once here.

    Example:
        answers = training.ValidationAnswers(validation_dataset)
        history = model.fit(..., callbacks=[answers])
        history.history[training.ANSWERS_KEY]
    """

    def __init__(self, validation: tf.data.Dataset) -> None:
        super().__init__()
        self.batches = list(validation.as_numpy_iterator())
        self.labels = np.concatenate([np.argmax(labels, axis=1) for _, labels in self.batches])

    def share_right(self, model: keras.Model) -> float:
        """Returns the share of the validation images `model` answers right.

        Args:
            model: the model whose answers (its output's most likely class) are counted.

        Returns:
            The share answered right, 0 to 1.
        """
        answers = [
            np.argmax(keras.ops.convert_to_numpy(model(images, training=False)), axis=1)
            for images, _ in self.batches
        ]
        return float(np.mean(np.concatenate(answers) == self.labels))

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        """Puts the share answered right into `logs[ANSWERS_KEY]`.

        Args:
            epoch: the epoch's index (unused).
            logs: the epoch's logs, which `History` records after this callback.
        """
        if logs is not None:
            logs[ANSWERS_KEY] = self.share_right(self.model)


def plot_history(history: keras.callbacks.History, *, title: str = "Training") -> Figure:
    """Draws loss and accuracy per epoch, training and validation, from a Keras History.

    Args:
        history: what `model.fit` returned; its `history` dict must hold "loss" and
            "accuracy" (compile with `metrics=["accuracy"]`), and "val_loss" and
            "val_accuracy" when there was validation data; the validation accuracy drawn
            is `ValidationAnswers`'s share answered right where the history has it.
        title: the figure's title.

    Returns:
        The matplotlib Figure: loss on the left, accuracy on the right.

    Raises:
        ValueError: if the history holds no "loss" or no "accuracy", naming the keys it has.

    Example:
        training.plot_history(model.fit(train, validation_data=val, epochs=10))
    """
    metrics = history.history
    missing = [name for name in ("loss", "accuracy") if name not in metrics]
    if missing:
        raise ValueError(
            f"The history holds no {' or '.join(repr(m) for m in missing)}: it holds "
            f"{sorted(metrics)}. Compile with metrics=['accuracy'] and pass what fit() returns."
        )
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for axis, name in zip(axes, ("loss", "accuracy"), strict=True):
        epochs = range(1, len(metrics[name]) + 1)
        axis.plot(epochs, metrics[name], "o-", label="training")
        if name == "accuracy" and ANSWERS_KEY in metrics:
            axis.plot(epochs, metrics[ANSWERS_KEY], "o-", label="validation (answers)")
        elif f"val_{name}" in metrics:
            axis.plot(epochs, metrics[f"val_{name}"], "o-", label="validation")
        axis.set_xlabel("epoch")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_title(name)
        axis.legend()
    figure.suptitle(title)
    figure.tight_layout()
    return figure
