"""Checks for lab 4's TODO 4: the model compiled under the strategy (`train_keras` names it).

The model is built twice on TensorFlow: with the lab's strategy and with a stand-in
one-device `MirroredStrategy`, whose scope every variable must be made in.
"""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING

import keras
import numpy as np
import tensorflow as tf

from utils.checks._base import CHECK_ERRORS, call_eagerly, fail, first_line, passed

if TYPE_CHECKING:
    from utils.strategy import StrategyChoice


def _stand_in_choice():
    """A one-device MirroredStrategy on the CPU: a real scope, unlike the default strategy."""
    from utils import strategy  # Imported here: only this check needs it.

    logger = tf.get_logger()
    level = logger.level
    logger.setLevel(logging.WARNING)  # Not "Using MirroredStrategy with devices ...".
    try:
        mirrored = tf.distribute.MirroredStrategy(["/cpu:0"])
    finally:
        logger.setLevel(level)
    return strategy.StrategyChoice(mirrored, "CPU", ("/cpu:0",))


def _describe_rate(rate) -> str:
    if isinstance(rate, dict):  # A schedule, as the optimizer's config holds it.
        return f"the schedule {rate.get('class_name')}({rate.get('config')})"
    return f"a constant {rate:g}" if isinstance(rate, numbers.Real) else repr(rate)


def _check_learning_rate(optimizer, learning_rate, todo: int, name: str) -> None:
    """Fails unless the optimizer's rate is `learning_rate`: the same schedule, or number."""
    __tracebackhide__ = True
    found = optimizer.get_config()["learning_rate"]
    if isinstance(learning_rate, keras.optimizers.schedules.LearningRateSchedule):
        expected = keras.optimizers.schedules.serialize(learning_rate)
        if found != expected:
            fail(todo, name, f"expected the learning-rate schedule {expected['class_name']}"
                 f"({expected['config']}); found {_describe_rate(found)}. Give the optimizer "
                 "the schedule object, keras.optimizers.Adam(learning_rate_schedule), not a "
                 "number.")  # fmt: skip
    elif not isinstance(found, numbers.Real) or not math.isclose(
        found, learning_rate, rel_tol=1e-5
    ):
        fail(
            todo, name, f"expected learning rate {learning_rate:g}; found {_describe_rate(found)}."
        )


def _check_loss(loss, num_classes: int, todo: int, name: str) -> None:
    """Fails unless `loss` is the cross-entropy of probabilities: -log 0.5 where the right
    class has 0.5."""
    __tracebackhide__ = True
    labels = np.eye(num_classes, dtype=np.float32)[np.arange(8) % num_classes]
    probabilities = np.where(labels == 1, 0.5, 0.5 / (num_classes - 1)).astype(np.float32)
    wanted = -math.log(0.5)
    try:
        function = keras.losses.get(loss) if isinstance(loss, str) else loss
        value = float(np.mean(keras.ops.convert_to_numpy(function(labels, probabilities))))
        found = f"{value:.3f}"
    except CHECK_ERRORS as error:
        value, found = None, f"an error: {first_line(error)}"
    if value is None or not math.isclose(value, wanted, rel_tol=1e-3):
        fail(todo, name, f"expected the categorical cross-entropy of the softmax outputs (-log "
             f"0.5 = {wanted:.3f} where the right class has probability 0.5); found {found}. "
             "Use loss='categorical_crossentropy'.")  # fmt: skip


def check_compiled_model(
    build_model: Callable,
    *,
    todo: int,
    choice: StrategyChoice,
    learning_rate: float | keras.optimizers.schedules.LearningRateSchedule,
    steps_per_execution: int,
    image_size: int,
    num_classes: int,
) -> None:
    """Checks `build_model(choice)`: variables made under `choice.scope()`, compiled as asked.

    On TensorFlow it is also called with a stand-in one-device `MirroredStrategy`, whose
    scope every variable must be made in: the default strategy of one CPU accepts a model
    built outside any scope.

    Args:
        build_model: the learner's function, called eagerly.
        todo: the TODO's number, named in every message.
        choice: the lab's strategy (`strategy.find_strategy`).
        learning_rate: the optimizer's rate: a number, or a schedule (compared by config).
        steps_per_execution: the value `compile()` must be given.
        image_size: the side of the input images, in pixels.
        num_classes: the number of outputs.

    Raises:
        CheckFailed: naming the TODO, when the result is not a compiled `keras.Model` of
            the right shapes, rate, steps and loss, or its variables were made outside
            the strategy's scope.

    Example:
        checks.check_compiled_model(build_model, todo=4, choice=choice,
                                    learning_rate=learning_rate_schedule,
                                    steps_per_execution=16, image_size=96, num_classes=5)
    """
    __tracebackhide__ = True
    name, expected = "build_model", "a compiled keras.Model"
    model = call_eagerly(build_model, (choice,), todo=todo, name=name, expected=expected)
    if not isinstance(model, keras.Model):
        fail(todo, name, f"expected it to return a keras.Model; found a {type(model).__name__}.")
    if tuple(model.input_shape) != (None, image_size, image_size, 3):
        fail(todo, name, f"expected input shape (None, {image_size}, {image_size}, 3).")
    if tuple(model.output_shape) != (None, num_classes) or model.outputs[0].dtype != "float32":
        fail(todo, name, f"expected float32 outputs of shape (None, {num_classes}).")
    if not model.compiled or model.optimizer is None:
        fail(todo, name, "expected the model compiled: call model.compile(...).")
    _check_learning_rate(model.optimizer, learning_rate, todo, name)
    if model.steps_per_execution != steps_per_execution:
        fail(todo, name, f"expected steps_per_execution={steps_per_execution} in compile(); "
             f"found {model.steps_per_execution}.")  # fmt: skip
    _check_loss(model.loss, num_classes, todo, name)
    if choice.backend == "tensorflow":
        stand_in = _stand_in_choice()
        other = call_eagerly(build_model, (stand_in,), todo=todo, name=name, expected=expected)
        made_in = stand_in.strategy.extended.variable_created_in_scope
        outside = [weight for weight in other.weights if not made_in(weight.value)]
        if outside:
            fail(todo, name, f"expected every variable made under choice.scope(); called with "
                 f"another strategy, {len(outside)} of its {len(other.weights)} weights were "
                 "made outside its scope. Build and compile the model inside `with "
                 "choice.scope():`.")  # fmt: skip
    passed(todo, f"compiled under the strategy, {steps_per_execution} steps per execution.")
