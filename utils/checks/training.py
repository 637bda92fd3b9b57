"""Checks for lab 4: scaling with replicas, augmentation, the training pipeline, the model."""

from __future__ import annotations

import math
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from utils.checks._base import (
    CHECK_ERRORS,
    _fail,
    _first_line,
    _passed,
    _require_dataset,
    _require_done,
    _require_result,
)
from utils.checks.records import dataset_ops


def check_scaling(
    global_batch_size,
    learning_rate,
    *,
    todo: int,
    choice,
    batch_per_replica: int,
    base_learning_rate: float,
    max_learning_rate: float,
):
    """Checks the batch size and learning rate scaled with `choice.num_replicas`, capped.

    Example:
        checks.check_scaling(global_batch_size, learning_rate, todo=1, choice=choice,
                             batch_per_replica=32, base_learning_rate=0.002,
                             max_learning_rate=0.008)
    """
    __tracebackhide__ = True
    replicas = choice.num_replicas
    expected_rate = min(base_learning_rate * replicas, max_learning_rate)
    rule = f"min({base_learning_rate} x {replicas}, {max_learning_rate})"
    _require_done(global_batch_size, todo, "global_batch_size", f"{batch_per_replica} x {replicas}")
    _require_done(learning_rate, todo, "learning_rate", rule)
    if global_batch_size != batch_per_replica * replicas:
        _fail(
            todo,
            "global_batch_size",
            f"expected {batch_per_replica} per replica x {replicas} replica(s) = "
            f"{batch_per_replica * replicas}; found {global_batch_size}.",
        )
    if not math.isclose(learning_rate, expected_rate):
        _fail(
            todo,
            "learning_rate",
            f"expected {rule} = {expected_rate:g}; found {learning_rate}. Scale with the "
            "replicas, but never above MAX_LEARNING_RATE.",
        )
    _passed(todo, "batch size and learning rate scale with the replicas.")


def check_augment(augment: Callable, *, todo: int, image_size: int):
    """Checks `augment(images, labels)`: same shapes and labels, images changed at random.

    Example:
        checks.check_augment(augment, todo=2, image_size=96)
    """
    __tracebackhide__ = True
    name = "augment"
    expected = "(images, labels) of the same shapes, the images flipped at random"
    # Images that any flip changes: a bright top-left corner.
    images = np.zeros((8, image_size, image_size, 3), np.uint8)
    images[:, : image_size // 2, : image_size // 4] = 255
    labels = np.eye(8, 5, dtype=np.float32)
    batches = tf.data.Dataset.from_tensors((images, labels)).repeat(6)
    try:
        _require_result(augment(tf.constant(images), tf.constant(labels)), todo, name, expected)
        found = list(batches.map(augment).as_numpy_iterator())
    except CHECK_ERRORS as error:
        _fail(
            todo,
            name,
            f"expected {expected}, with TensorFlow ops (it runs inside Dataset.map); found an "
            f"error: {_first_line(error)}",
        )
    changed = 0
    for new_images, new_labels in found:
        if new_images.shape != images.shape or new_images.dtype != images.dtype:
            _fail(
                todo,
                name,
                f"expected images of shape {images.shape} and dtype uint8; found "
                f"{new_images.shape}, {new_images.dtype}.",
            )
        if not np.array_equal(new_labels, labels):
            _fail(todo, name, "expected the labels unchanged; they changed.")
        changed += int(np.sum(np.any(new_images != images, axis=(1, 2, 3))))
    total = len(found) * len(images)
    if changed == 0:
        _fail(todo, name, f"expected some images changed at random; all {total} came back as is.")
    if changed == total:
        _fail(
            todo,
            name,
            f"expected a random choice per image; all {total} were changed. Use the random_* "
            "functions, which flip each image or not, at random.",
        )
    _passed(todo, "labels kept, images flipped at random (some changed, some not).")


def check_training_dataset(dataset, *, todo: int, batch_size: int, image_size: int, num_classes):
    """Checks the training dataset: static batches; cache, shuffle, repeat, map, prefetch.

    Example:
        checks.check_training_dataset(train, todo=3, batch_size=32, image_size=96,
                                      num_classes=5)
    """
    __tracebackhide__ = True
    name = "make_training_dataset"
    expected = f"batches of exactly {batch_size} (image, label), endless and shuffled"
    _require_dataset(dataset, todo, name, expected)
    image_spec, label_spec = tf.nest.flatten(dataset.element_spec)[:2]
    wanted = (batch_size, image_size, image_size, 3)
    if tuple(image_spec.shape) != wanted or tuple(label_spec.shape) != (batch_size, num_classes):
        _fail(
            todo,
            name,
            f"expected images of static shape {wanted} and labels {(batch_size, num_classes)}; "
            f"found {image_spec.shape} and {label_spec.shape}. Batch with "
            "drop_remainder=True so that every batch has the same, known size.",
        )
    ops = dataset_ops(dataset)
    for step, op in [("cache()", "Cache"), ("shuffle()", "Shuffle"), ("repeat()", "Repeat")]:
        if not any(o.startswith(op) for o in ops):
            _fail(todo, name, f"expected {step} in the pipeline; found {_steps(ops)}.")
    cache = next(i for i, o in enumerate(ops) if o.startswith("Cache"))
    shuffle = next(i for i, o in enumerate(ops) if o.startswith("Shuffle"))
    if cache > shuffle:
        _fail(
            todo,
            name,
            "expected cache() before shuffle(): a cache after the shuffle replays the first "
            "epoch's order in every epoch.",
        )
    if ops[-1] != "PrefetchDataset":
        _fail(todo, name, f"expected prefetch() as the last step; the last is {ops[-1]}.")
    images, _ = next(iter(dataset))
    if images.dtype != tf.uint8:
        _fail(todo, name, f"expected uint8 images; found {images.dtype.name}.")
    _passed(todo, f"endless, shuffled batches of {batch_size} images of {wanted[1:]}.")


def _steps(ops: list[str]) -> str:
    return " -> ".join(op.replace("Dataset", "").rstrip("V2") for op in ops)


def check_compiled_model(
    model,
    *,
    todo: int,
    choice,
    learning_rate: float,
    steps_per_execution: int,
    image_size: int,
    num_classes: int,
):
    """Checks the model: built under `choice.scope()`, compiled with the settings asked for.

    Example:
        checks.check_compiled_model(model, todo=4, choice=choice,
                                    learning_rate=0.002, steps_per_execution=16,
                                    image_size=96, num_classes=5)
    """
    __tracebackhide__ = True
    name = "model"
    _require_done(model, todo, name, "a compiled keras.Model")
    if choice.strategy is not None and model.distribute_strategy is not choice.strategy:
        _fail(
            todo,
            name,
            "expected the model built under choice.scope(): create it inside "
            "`with choice.scope():`.",
        )
    if tuple(model.input_shape) != (None, image_size, image_size, 3):
        _fail(todo, name, f"expected input shape (None, {image_size}, {image_size}, 3).")
    if tuple(model.output_shape) != (None, num_classes) or model.outputs[0].dtype != "float32":
        _fail(todo, name, f"expected float32 outputs of shape (None, {num_classes}).")
    if not model.compiled or model.optimizer is None:
        _fail(todo, name, "expected the model compiled: call model.compile(...).")
    rate = float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))
    if not math.isclose(rate, learning_rate, rel_tol=1e-5):
        _fail(todo, name, f"expected learning rate {learning_rate:g}; found {rate:g}.")
    if model.steps_per_execution != steps_per_execution:
        _fail(
            todo,
            name,
            f"expected steps_per_execution={steps_per_execution} in compile(); found "
            f"{model.steps_per_execution}.",
        )
    if "categorical_crossentropy" not in str(model.loss):
        _fail(todo, name, f"expected loss='categorical_crossentropy'; found {model.loss}.")
    _passed(todo, f"compiled under the strategy, {steps_per_execution} steps per execution.")
