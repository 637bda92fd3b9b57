"""Checks for lab 4: scaling with replicas, augmentation, the training pipeline, the model.

Each check tests a property the lesson teaches, on data or settings that expose the usual
mistake: scaling probed at 1, 2 and 8 replicas; the model built with a stand-in strategy;
the training pipeline read for two epochs with its shards taken away after the first.
"""

from __future__ import annotations

import itertools
import logging
import math
import numbers
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import keras
import numpy as np
import tensorflow as tf

from utils.checks._base import (
    CHECK_ERRORS,
    call_eagerly,
    dataset_ops,
    fail,
    first_line,
    passed,
    require_dataset,
    require_result,
)

if TYPE_CHECKING:
    from utils.strategy import StrategyChoice

# The replica counts TODO 1 is probed with: one (this laptop), two, and a TPU's eight cores.
PROBED_REPLICAS = (1, 2, 8)
# Pairs of images that shared a batch in one epoch and share one again in the next: a few
# in ten at most with a shuffle before the batch (fewer, the larger the buffer); all of
# them when whole batches are shuffled, and about half or more when an endless stream is
# batched, then shuffled (each epoch's batches shifted by the epoch's remainder).
MAX_REPEATED_PAIRS = 0.4
# Fewer batches in an epoch cannot tell: with one, every pair shares a batch again however
# the images were shuffled (a small dataset on 8 devices, its batch capped to the data).
MIN_BATCHES_TO_TELL = 4
# Ops that may follow prefetch() and change nothing in what is prefetched.
_AFTER_PREFETCH = {"OptionsDataset", "ModelDataset", "PrivateThreadPoolDataset",
                   "MaxIntraOpParallelismDataset"}  # fmt: skip


def check_scaling(
    scale_for_replicas: Callable,
    *,
    todo: int,
    batch_per_replica: int,
    base_learning_rate: float,
    max_learning_rate: float,
) -> None:
    """Checks `scale_for_replicas(n)` -> (global batch, learning rate) at 1, 2 and 8 replicas.

    Args:
        scale_for_replicas: the learner's function, called eagerly.
        todo: the TODO's number, named in every message.
        batch_per_replica: the batch each replica gets.
        base_learning_rate: the learning rate for one replica.
        max_learning_rate: the cap of the scaled learning rate.

    Raises:
        CheckFailed: naming the TODO and the replica count, when the global batch is not
            `batch_per_replica` x replicas or the rate is not the base x replicas, capped.

    Example:
        checks.check_scaling(scale_for_replicas, todo=1, batch_per_replica=32,
                             base_learning_rate=0.002, max_learning_rate=0.008)
    """
    __tracebackhide__ = True
    name = "scale_for_replicas"
    expected = "(global_batch_size, learning_rate)"
    for replicas in PROBED_REPLICAS:
        found = call_eagerly(
            scale_for_replicas, (replicas,), todo=todo, name=name, expected=expected
        )
        if not isinstance(found, tuple) or len(found) != 2:
            fail(todo, name, f"expected it to return {expected}; found {found!r}.")
        global_batch_size, learning_rate = found
        if (
            not isinstance(global_batch_size, numbers.Integral)
            or global_batch_size != batch_per_replica * replicas
        ):
            fail(
                todo,
                name,
                f"at {replicas} replica(s), expected a global batch of {batch_per_replica} per "
                f"replica x {replicas} = {batch_per_replica * replicas}; found "
                f"{global_batch_size}.",
            )
        rule = f"min({base_learning_rate:g} x {replicas}, {max_learning_rate:g})"
        expected_rate = min(base_learning_rate * replicas, max_learning_rate)
        if not isinstance(learning_rate, numbers.Real) or not math.isclose(
            learning_rate, expected_rate
        ):
            fail(
                todo,
                name,
                f"at {replicas} replica(s), expected a learning rate of {rule} = "
                f"{expected_rate:g}; found {learning_rate!r}. Scale it with the replicas, but "
                "never above MAX_LEARNING_RATE.",
            )
    probed = ", ".join(str(n) for n in PROBED_REPLICAS)
    passed(todo, f"batch size and learning rate scale with {probed} replicas, capped.")


def check_augment(augment: Callable, *, todo: int, image_size: int) -> None:
    """Checks `augment(images, labels)`: same shapes and labels, images changed at random.

    Args:
        augment: the learner's function, run eagerly once, then in `Dataset.map`.
        todo: the TODO's number, named in every message.
        image_size: the side of the square images, in pixels.

    Raises:
        CheckFailed: naming the TODO, when shapes, dtype or labels change, or the images
            are flipped always or never.

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
        require_result(augment(tf.constant(images), tf.constant(labels)), todo, name, expected)
        found = list(batches.map(augment).as_numpy_iterator())
    except CHECK_ERRORS as error:
        fail(
            todo,
            name,
            f"expected {expected}, with TensorFlow ops (it runs inside Dataset.map); found an "
            f"error: {first_line(error)}",
        )
    changed = 0
    for new_images, new_labels in found:
        if new_images.shape != images.shape or new_images.dtype != images.dtype:
            fail(
                todo,
                name,
                f"expected images of shape {images.shape} and dtype uint8; found "
                f"{new_images.shape}, {new_images.dtype}.",
            )
        if not np.array_equal(new_labels, labels):
            fail(todo, name, "expected the labels unchanged; they changed.")
        changed += int(np.sum(np.any(new_images != images, axis=(1, 2, 3))))
    total = len(found) * len(images)
    if changed == 0:
        fail(todo, name, f"expected some images changed at random; all {total} came back as is.")
    if changed == total:
        fail(
            todo,
            name,
            f"expected a random choice per image; all {total} were changed. Use the random_* "
            "functions, which flip each image or not, at random.",
        )
    passed(todo, "labels kept, images flipped at random (some changed, some not).")


def _flip_free_key(image: np.ndarray) -> tuple[int, int]:
    """The same key for an image and its flips; and the key of this very orientation."""
    variants = [image, image[:, ::-1], image[::-1], image[::-1, ::-1]]
    hashes = [hash(np.ascontiguousarray(variant).tobytes()) for variant in variants]
    return min(hashes), hashes[0]


def _read_elements(iterator, count: int, keys: list | None, batches: list | None = None) -> None:
    """Reads `count` elements (image, label) from batches; appends their keys to `keys`.

    `batches`, if given, gets each batch's flip-free keys, one list per batch.
    """
    read = 0
    while read < count:
        images, _ = next(iterator)
        if keys is not None:
            batch_keys = [_flip_free_key(image) for image in np.asarray(images)]
            keys.extend(batch_keys)
            if batches is not None:
                batches.append([key for key, _ in batch_keys])
        read += len(images)


def _repeated_pairs(batches: list, batches_per_epoch: int) -> float:
    """The share of pairs of images together in a batch of epoch 2 that were so in epoch 1."""
    first, second = batches[:batches_per_epoch], batches[batches_per_epoch : 2 * batches_per_epoch]
    together = {pair for batch in first for pair in itertools.combinations(sorted(batch), 2)}
    pairs = [pair for batch in second for pair in itertools.combinations(sorted(batch), 2)]
    return sum(pair in together for pair in pairs) / len(pairs) if pairs else 0.0


def _check_prefetch_last(dataset, todo: int, name: str) -> None:
    """Fails unless the dataset's graph ends with prefetch() (options aside)."""
    __tracebackhide__ = True
    ops = dataset_ops(dataset)
    if ops is None:  # The graph cannot be read with this TensorFlow: nothing to say.
        return
    last = next((op for op in reversed(ops) if op not in _AFTER_PREFETCH), None)
    if last == "PrefetchDataset":
        return
    where = "none" if "PrefetchDataset" not in ops else f"one, but {last} comes after it"
    fail(
        todo,
        name,
        f"expected prefetch(tf.data.AUTOTUNE) at the end; found {where}. Without it, the "
        "accelerator waits at every step while the CPU batches and augments the next batch: "
        "on a TPU each step then takes the input's time plus the compute's, instead of the "
        "longer of the two.",
    )


def check_training_dataset(
    make_training_dataset: Callable,
    paths: Sequence[str],
    *,
    todo: int,
    batch_size: int,
    image_size: int,
    num_classes: int,
    num_images: int,
) -> None:
    """Checks `make_training_dataset(paths)` by reading two epochs and more from a copy.

    The shards are copied to a scratch folder; the dataset is built on the copies, read
    for one epoch, and the copies are deleted: the next epochs must come from `cache()`.
    Then: each epoch in a new order (shuffled after the cache), in new batches (shuffled
    before the batch), each image flipped anew in each epoch (augmented after the cache),
    and prefetch() last. The learner's shards are not touched.

    Args:
        make_training_dataset: the learner's function, called on the copies' paths.
        paths: the training shards.
        todo: the TODO's number, named in every message.
        batch_size: the batch size the lab asks for.
        image_size: the side of the images in the shards, in pixels.
        num_classes: the length of the one-hot labels.
        num_images: the images the shards hold together (one epoch).

    Raises:
        CheckFailed: naming the TODO, when the batches are not of static shape, the
            dataset ends, later epochs read the shards again, repeat the first epoch's
            order or its batches (shuffle after batch), are not flipped anew, or the
            pipeline does not end with prefetch (read from its graph).

    Example:
        checks.check_training_dataset(make_training_dataset, train_paths, todo=3,
                                      batch_size=32, image_size=96, num_classes=5,
                                      num_images=2983)
    """
    __tracebackhide__ = True
    name = "make_training_dataset"
    expected = f"a dataset of batches of exactly {batch_size} (image, label), endless"
    scratch = Path(tempfile.mkdtemp(prefix="check_training_dataset_"))
    try:
        copies = []
        for index, path in enumerate(paths):
            copy = str(scratch / f"{index:05d}_{Path(str(path)).name}")
            tf.io.gfile.copy(str(path), copy)
            copies.append(copy)
        dataset = call_eagerly(
            make_training_dataset, (copies,), todo=todo, name=name, expected=expected
        )
        require_dataset(dataset, todo, name, expected)
        _check_batches(dataset, todo, name, batch_size, image_size, num_classes)
        if dataset.cardinality() != tf.data.INFINITE_CARDINALITY:
            fail(
                todo,
                name,
                "expected an endless dataset (fit() is told how many steps make an epoch); "
                "this one ends. Add repeat() after shuffle().",
            )
        keys = []  # (flip-free key, this orientation's key) of each image read, in order.
        batches = []  # The flip-free keys of each batch read.
        iterator = iter(dataset)
        try:
            # Past the first epoch.
            _read_elements(iterator, num_images + batch_size, keys, batches)
        except CHECK_ERRORS as error:
            fail(todo, name, f"expected it to read the shards; found an error: {first_line(error)}")
        shutil.rmtree(scratch)  # Later epochs must come from the cache.
        try:
            _read_elements(iterator, num_images, keys, batches)
            # Past what the shuffle buffer and prefetch may have read ahead (a buffer of
            # up to 4096 images): one more epoch must then be read from somewhere.
            _read_elements(iterator, 4096 + 8 * batch_size, None)
        except CHECK_ERRORS:
            fail(
                todo,
                name,
                "expected every epoch after the first to come from cache(); it read the "
                "shards again. Put cache() right after read_images(paths), before repeat(): "
                "repeat() before cache() caches an endless stream that never replays.",
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    first, second = keys[:num_images], keys[num_images : 2 * num_images]
    if [key for key, _ in second] == [key for key, _ in first]:
        fail(
            todo,
            name,
            "expected each epoch in a new order; the second epoch repeats the first one's. "
            "shuffle() after cache(): a cache after the shuffle replays the first epoch's order.",
        )
    batches_per_epoch = num_images // batch_size
    repeated = _repeated_pairs(batches, batches_per_epoch)
    if batches_per_epoch >= MIN_BATCHES_TO_TELL and repeated > MAX_REPEATED_PAIRS:
        fail(
            todo,
            name,
            f"expected new batches in each epoch; {repeated:.0%} of the pairs of images that "
            "shared a batch in the first epoch share one again in the second. shuffle() "
            "before batch(): shuffled after it, the same images stay batched together in every "
            "epoch, in another order. On a TPU as anywhere, the steps then repeat the same "
            "gradients and the model generalizes less from the same number of steps.",
        )
    orientation = dict(first)
    seen_again = [(key, flipped) for key, flipped in second if key in orientation]
    changed = sum(orientation[key] != flipped for key, flipped in seen_again)
    if seen_again and changed == 0:
        fail(
            todo,
            name,
            f"expected the images flipped anew in each epoch; all {len(seen_again)} images "
            "seen in both epochs came back exactly as before. Map augment after batch(), "
            "after cache().",
        )
    _check_prefetch_last(dataset, todo, name)
    untold = (
        f" (new batches in each epoch not checked: an epoch of {num_images} images holds "
        f"{batches_per_epoch} batch{'es' * (batches_per_epoch != 1)} of {batch_size}, and it "
        f"takes {MIN_BATCHES_TO_TELL} to tell)"
        if batches_per_epoch < MIN_BATCHES_TO_TELL
        else ""
    )
    passed(
        todo,
        f"endless batches of {batch_size} images of {(image_size, image_size, 3)}; later "
        f"epochs from the cache, each in a new order, flipped anew{untold}.",
    )


def _check_batches(dataset, todo, name, batch_size, image_size, num_classes):
    __tracebackhide__ = True
    specs = tf.nest.flatten(dataset.element_spec)
    wanted = (batch_size, image_size, image_size, 3)
    if len(specs) != 2:
        fail(todo, name, f"expected (image, label) pairs; found {dataset.element_spec}.")
    image_spec, label_spec = specs
    if tuple(image_spec.shape) != wanted or tuple(label_spec.shape) != (batch_size, num_classes):
        fail(
            todo,
            name,
            f"expected images of static shape {wanted} and labels {(batch_size, num_classes)}; "
            f"found {image_spec.shape} and {label_spec.shape}. Batch with "
            "drop_remainder=True so that every batch has the same, known size.",
        )
    if image_spec.dtype != tf.uint8:
        fail(todo, name, f"expected uint8 images; found {image_spec.dtype.name}.")


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


def _loss_value(loss, labels, probabilities) -> float:
    function = keras.losses.get(loss) if isinstance(loss, str) else loss
    return float(np.mean(keras.ops.convert_to_numpy(function(labels, probabilities))))


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
            fail(
                todo,
                name,
                f"expected the learning-rate schedule {expected['class_name']}"
                f"({expected['config']}); found "
                f"{_describe_rate(found)}. Give the optimizer the schedule object, "
                "keras.optimizers.Adam(learning_rate_schedule), not a number.",
            )
    elif not isinstance(found, numbers.Real) or not math.isclose(
        found, learning_rate, rel_tol=1e-5
    ):
        fail(
            todo, name, f"expected learning rate {learning_rate:g}; found {_describe_rate(found)}."
        )


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

    On TensorFlow, `build_model` is also called with a stand-in strategy (a one-device
    `MirroredStrategy`), and every variable of that model must have been made in its scope:
    the default strategy of one CPU would accept a model built outside any scope.

    Args:
        build_model: the learner's function, called eagerly.
        todo: the TODO's number, named in every message.
        choice: the lab's strategy (`strategy.find_strategy`).
        learning_rate: the learning rate the optimizer must have: a number, or a
            schedule object (compared by its configuration).
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
                                    steps_per_execution=16,
                                    image_size=96, num_classes=5)
    """
    __tracebackhide__ = True
    name = "build_model"
    model = call_eagerly(
        build_model, (choice,), todo=todo, name=name, expected="a compiled keras.Model"
    )
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
        fail(
            todo,
            name,
            f"expected steps_per_execution={steps_per_execution} in compile(); found "
            f"{model.steps_per_execution}.",
        )
    labels = np.eye(num_classes, dtype=np.float32)[np.arange(8) % num_classes]
    probabilities = np.full((8, num_classes), 0.5 / (num_classes - 1), np.float32)
    probabilities[np.arange(8), np.arange(8) % num_classes] = 0.5
    expected_loss = -math.log(0.5)
    try:
        found_loss = _loss_value(model.loss, labels, probabilities)
    except CHECK_ERRORS as error:
        found_loss = f"an error: {first_line(error)}"
    if not isinstance(found_loss, float) or not math.isclose(
        found_loss, expected_loss, rel_tol=1e-3
    ):
        found = found_loss if isinstance(found_loss, str) else f"{found_loss:.3f}"
        fail(
            todo,
            name,
            f"expected the categorical cross-entropy of the softmax outputs (-log 0.5 = "
            f"{expected_loss:.3f} where the right class has probability 0.5); found {found}. "
            "Use loss='categorical_crossentropy'.",
        )
    if choice.backend == "tensorflow":
        stand_in = _stand_in_choice()
        other = call_eagerly(
            build_model, (stand_in,), todo=todo, name=name, expected="a compiled keras.Model"
        )
        outside = [
            weight
            for weight in other.weights
            if not stand_in.strategy.extended.variable_created_in_scope(weight.value)
        ]
        if outside:
            fail(
                todo,
                name,
                f"expected every variable made under choice.scope(); called with another "
                f"strategy, {len(outside)} of its {len(other.weights)} weights were made "
                "outside its scope. Build and compile the model inside `with choice.scope():`.",
            )
    passed(todo, f"compiled under the strategy, {steps_per_execution} steps per execution.")
