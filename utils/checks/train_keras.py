"""Checks for lab 4: scaling with replicas, augmentation, the training pipeline, the model.

Each probes the usual mistake: scaling at 1, 2 and 8 replicas; the pipeline read for two
epochs with its shards taken away after one. The model's check is in `train_keras_model`.
"""

from __future__ import annotations

import itertools
import math
import numbers
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from utils.checks._base import (
    CHECK_ERRORS,
    OPTIONS_ONLY_OPS,
    call_eagerly,
    dataset_ops,
    dataset_steps,
    fail,
    first_line,
    passed,
    require_dataset,
    require_result,
)
from utils.checks.train_keras_model import (
    _stand_in_choice,  # noqa: F401 (tools/grading/export_objects.py imports it from here)
    check_compiled_model,
)

__all__ = ["check_augment", "check_compiled_model", "check_scaling", "check_training_dataset"]

# The replica counts TODO 1 is probed with: one (this laptop), two, and a TPU's eight cores.
PROBED_REPLICAS = (1, 2, 8)
# Pairs of images batched together in epoch 1 and again in epoch 2: a few in ten at most
# with a shuffle before the batch; all when whole batches are shuffled, and about half or
# more when an endless stream is batched, then shuffled.
MAX_REPEATED_PAIRS = 0.4
# Fewer batches in an epoch cannot tell: with one, every pair shares a batch again.
MIN_BATCHES_TO_TELL = 4
_AFTER_PREFETCH = {*OPTIONS_ONLY_OPS, "ModelDataset"}  # Ops that change nothing prefetched.


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
    name, expected = "scale_for_replicas", "(global_batch_size, learning_rate)"
    for n in PROBED_REPLICAS:
        found = call_eagerly(scale_for_replicas, (n,), todo=todo, name=name, expected=expected)
        if not isinstance(found, tuple) or len(found) != 2:
            fail(todo, name, f"expected it to return {expected}; found {found!r}.")
        batch, rate = found
        if not isinstance(batch, numbers.Integral) or batch != batch_per_replica * n:
            fail(todo, name, f"at {n} replica(s), expected a global batch of {batch_per_replica} "
                 f"per replica x {n} = {batch_per_replica * n}; found {batch}.")  # fmt: skip
        wanted = min(base_learning_rate * n, max_learning_rate)
        if not isinstance(rate, numbers.Real) or not math.isclose(rate, wanted):
            fail(todo, name, f"at {n} replica(s), expected a learning rate of min("
                 f"{base_learning_rate:g} x {n}, {max_learning_rate:g}) = {wanted:g}; found "
                 f"{rate!r}. Scale it with the replicas, but never above "
                 "MAX_LEARNING_RATE.")  # fmt: skip
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
    images = np.zeros((8, image_size, image_size, 3), np.uint8)
    images[:, : image_size // 2, : image_size // 4] = 255  # Any flip changes it.
    labels = np.eye(8, 5, dtype=np.float32)
    try:
        require_result(augment(tf.constant(images), tf.constant(labels)), todo, name, expected)
        batches = tf.data.Dataset.from_tensors((images, labels)).repeat(6)
        found = list(batches.map(augment).as_numpy_iterator())
    except CHECK_ERRORS as error:
        fail(todo, name, f"expected {expected}, with TensorFlow ops (it runs inside "
             f"Dataset.map); found an error: {first_line(error)}")  # fmt: skip
    changed = 0
    for new_images, new_labels in found:
        if new_images.shape != images.shape or new_images.dtype != images.dtype:
            fail(todo, name, f"expected images of shape {images.shape} and dtype uint8; "
                 f"found {new_images.shape}, {new_images.dtype}.")  # fmt: skip
        if not np.array_equal(new_labels, labels):
            fail(todo, name, "expected the labels unchanged; they changed.")
        changed += int(np.sum(np.any(new_images != images, axis=(1, 2, 3))))
    total = len(found) * len(images)
    if changed == 0:
        fail(todo, name, f"expected some images changed at random; all {total} came back as is.")
    if changed == total:
        fail(todo, name, f"expected a random choice per image; all {total} were changed. Use "
             "the random_* functions, which flip each image or not, at random.")  # fmt: skip
    passed(todo, "labels kept, images flipped at random (some changed, some not).")


def _read(iterator, count: int, keys: list | None = None, batches: list | None = None) -> None:
    """Reads `count` (image, label) from batches; appends to `keys` each image's (key the
    same for its flips, key of this orientation), to `batches` each batch's flip-free keys."""
    while count > 0:
        images = np.asarray(next(iterator)[0])
        count -= len(images)
        if keys is None:
            continue
        hashes = [[hash(np.ascontiguousarray(v).tobytes()) for v in
                   (im, im[:, ::-1], im[::-1], im[::-1, ::-1])] for im in images]  # fmt: skip
        keys += [(min(h), h[0]) for h in hashes]
        batches.append([min(h) for h in hashes])


def _repeated_pairs(batches: list, per_epoch: int) -> float:
    """The share of pairs of images together in a batch of epoch 2 that were so in epoch 1."""
    pairs = [[p for b in epoch for p in itertools.combinations(sorted(b), 2)]
             for epoch in (batches[:per_epoch], batches[per_epoch : 2 * per_epoch])]  # fmt: skip
    together = set(pairs[0])
    return sum(pair in together for pair in pairs[1]) / len(pairs[1]) if pairs[1] else 0.0


def _require_paths_read(make_training_dataset: Callable, missing: list, todo: int) -> None:
    """Fails when the dataset made on shards that do not exist still gives a batch: it
    reads other files than its `paths` (the lab's train_paths), which the rest cannot tell."""
    __tracebackhide__ = True
    try:
        next(iter(make_training_dataset(missing)))
    except Exception:  # noqa: BLE001 (any error or none: it did read `paths`)
        return
    fail(todo, "make_training_dataset", "expected it to read the shards in `paths`, its "
         "argument; given paths of shards that do not exist, it still gave a batch: it reads "
         "other files. Start from read_images(paths).")  # fmt: skip


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

    Built on copies of the shards, read for one epoch, then the copies are deleted: later
    epochs must come from `cache()`, each in a new order (shuffled after the cache), in new
    batches (shuffled before the batch), flipped anew, prefetched last. Built on deleted
    copies, it must give nothing. The learner's shards are not touched.

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
            dataset ends, reads other shards than `paths`, later epochs read the shards
            again, repeat the first one's order or batches, are not flipped anew, or
            prefetch is not last (read from its graph).

    Example:
        checks.check_training_dataset(make_training_dataset, train_paths, todo=3,
                                      batch_size=32, image_size=96, num_classes=5,
                                      num_images=2983)
    """
    __tracebackhide__ = True
    name = "make_training_dataset"
    expected = f"a dataset of batches of exactly {batch_size} (image, label), endless"
    scratch = Path(tempfile.mkdtemp(prefix="check_training_dataset_"))
    keys, batches = [], []  # See _read.
    try:
        copies = [str(scratch / f"{i:05d}_{Path(str(p)).name}") for i, p in enumerate(paths)]
        for path, copy in zip(paths, copies, strict=True):
            tf.io.gfile.copy(str(path), copy)
        dataset = call_eagerly(make_training_dataset, (copies,), todo=todo, name=name,
                               expected=expected)  # fmt: skip
        require_dataset(dataset, todo, name, expected)
        _check_batches(dataset, todo, name, (batch_size, image_size, num_classes))
        if dataset.cardinality() != tf.data.INFINITE_CARDINALITY:
            fail(todo, name, "expected an endless dataset (fit() is told how many steps make "
                 "an epoch); this one ends. Add repeat() after shuffle().")  # fmt: skip
        iterator = iter(dataset)
        try:
            _read(iterator, num_images + batch_size, keys, batches)  # Past the first epoch.
        except CHECK_ERRORS as error:
            fail(todo, name, f"expected it to read the shards; found an error: {first_line(error)}")
        shutil.rmtree(scratch)  # Later epochs must come from the cache.
        try:  # Then past what the shuffle buffer (up to 4096) and prefetch read ahead.
            _read(iterator, num_images, keys, batches)
            _read(iterator, 4096 + 8 * batch_size)
        except CHECK_ERRORS:
            fail(todo, name, "expected every epoch after the first to come from cache(); it "
                 "read the shards again. Put cache() right after read_images(paths), before "
                 "repeat(): repeat() before cache() caches an endless stream that never "
                 "replays.")  # fmt: skip
        _require_paths_read(make_training_dataset, copies, todo)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    first, second = keys[:num_images], keys[num_images : 2 * num_images]
    small_buffer = _small_shuffle_buffer(dataset, batch_size)
    if [key for key, _ in second] == [key for key, _ in first]:
        fail(
            todo,
            name,
            "expected each epoch in a new order; the second epoch repeats the "
            "first one's. "
            + (
                small_buffer
                or "shuffle() after cache(): a cache after the "
                "shuffle replays the first epoch's order."
            ),
        )
    per_epoch = num_images // batch_size
    repeated = _repeated_pairs(batches, per_epoch)
    if per_epoch >= MIN_BATCHES_TO_TELL and repeated > MAX_REPEATED_PAIRS:
        fail(
            todo,
            name,
            f"expected new batches in each epoch; {repeated:.0%} of the pairs of "
            "images that shared a batch in the first epoch share one again in the second. "
            + (
                small_buffer
                or "shuffle() before batch(): shuffled after it, the same images "
                "stay batched together in every epoch, in another order."
            )
            + " On a TPU as "
            "anywhere, the steps then repeat the same gradients and the model generalizes "
            "less from the same number of steps.",
        )
    orientation = dict(first)
    seen_again = [(key, flipped) for key, flipped in second if key in orientation]
    if seen_again and all(orientation[key] == flipped for key, flipped in seen_again):
        fail(todo, name, f"expected the images flipped anew in each epoch; all "
             f"{len(seen_again)} images seen in both epochs came back exactly as before. Map "
             "augment after batch(), after cache().")  # fmt: skip
    _check_prefetch_last(dataset, todo, name)
    untold = "" if per_epoch >= MIN_BATCHES_TO_TELL else (
        f" (new batches in each epoch not checked: an epoch of {num_images} images holds "
        f"{per_epoch} batch{'es' * (per_epoch != 1)} of {batch_size}, and it takes "
        f"{MIN_BATCHES_TO_TELL} to tell)")  # fmt: skip
    passed(todo, f"endless batches of {batch_size} images of {(image_size, image_size, 3)}; "
           f"later epochs from the cache, each in a new order, flipped anew{untold}.")  # fmt: skip


def _small_shuffle_buffer(dataset, batch_size: int) -> str:
    """The hint for a shuffle whose buffer (read from the graph) is at most a batch: its
    images are drawn from their next few neighbours only. "" for none (or no graph)."""
    buffers = [
        step.constants[1]
        for step in dataset_steps(dataset) or []
        if step.op.startswith("ShuffleDataset")
        and len(step.constants) > 1
        and isinstance(step.constants[1], int)
        and step.constants[1] > 0
    ]
    if not buffers or min(buffers) > batch_size:
        return ""
    size = min(buffers)
    drawn = (
        "keeps the order: each image is drawn from a buffer of one"
        if size == 1
        else f"draws each image from the next {size} only (a batch holds {batch_size})"
    )
    return (
        f"The shuffle buffer is {size}: shuffle({size}) {drawn}. Shuffle with a buffer "
        "of thousands: shuffle(2048, seed=SEED)."
    )


def _check_batches(dataset, todo: int, name: str, sizes: tuple) -> None:
    """Fails unless the elements are (uint8 images, labels) of static batch shapes."""
    __tracebackhide__ = True
    batch_size, image_size, num_classes = sizes
    specs = tf.nest.flatten(dataset.element_spec)
    if len(specs) != 2:
        fail(todo, name, f"expected (image, label) pairs; found {dataset.element_spec}.")
    wanted = (batch_size, image_size, image_size, 3)
    if tuple(specs[0].shape) != wanted or tuple(specs[1].shape) != (batch_size, num_classes):
        fail(todo, name, f"expected images of static shape {wanted} and labels "
             f"{(batch_size, num_classes)}; found {specs[0].shape} and {specs[1].shape}. Batch "
             "with drop_remainder=True so that every batch has the same, known size.")  # fmt: skip
    if specs[0].dtype != tf.uint8:
        fail(todo, name, f"expected uint8 images; found {specs[0].dtype.name}.")


def _check_prefetch_last(dataset, todo: int, name: str) -> None:
    """Fails unless the dataset's graph ends with prefetch() (options aside)."""
    __tracebackhide__ = True
    ops = dataset_ops(dataset)  # None: this TensorFlow's graph cannot be read.
    last = next((op for op in reversed(ops or []) if op not in _AFTER_PREFETCH), None)
    if ops is None or last == "PrefetchDataset":
        return
    where = "none" if "PrefetchDataset" not in ops else f"one, but {last} comes after it"
    fail(todo, name, f"expected prefetch(tf.data.AUTOTUNE) at the end; found {where}. Without "
         "it, the accelerator waits at every step while the CPU batches and augments the next "
         "batch: on a TPU each step then takes the input's time plus the compute's, instead "
         "of the longer of the two.")  # fmt: skip
