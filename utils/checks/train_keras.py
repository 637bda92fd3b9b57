"""Checks for lab 4: one replica per device (the distribution), the training pipeline.

`check_distribution` compares the devices the TODO names with those Keras trains on here
and, on JAX, reads the distribution set in this process. `check_training_dataset` reads
the pipeline for two epochs and more, its shards taken away after the first.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import keras
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
)

__all__ = ["check_distribution", "check_training_dataset"]

# Pairs of images batched together in epoch 1 and again in epoch 2: a few in ten at most
# with a shuffle before the batch; all when whole batches are shuffled, and about half or
# more when an endless stream is batched, then shuffled.
MAX_REPEATED_PAIRS = 0.4
# Fewer batches in an epoch cannot tell: with one, every pair shares a batch again.
MIN_BATCHES_TO_TELL = 4
_AFTER_PREFETCH = {*OPTIONS_ONLY_OPS, "ModelDataset"}  # Ops that change nothing prefetched.


def _device_name(device: object) -> str:
    """Returns Keras's name of a device ("cpu:0") however it is given, else its repr.

    Args:
        device: a name ("cpu:0", "/device:CPU:0", "/job:localhost/.../device:CPU:0"), a JAX
            device (`jax.devices()`), or a `tf.config.LogicalDevice`.
    """
    if hasattr(device, "platform") and hasattr(device, "id"):  # A JAX device.
        return f"{device.platform}:{device.id}"
    name = getattr(device, "name", device)
    if not isinstance(name, str) or ":" not in name:
        return repr(device)
    return ":".join(name.rsplit("/", 1)[-1].lower().split(":")[-2:])


def _device_names(devices: object, todo: int, expected: list[str]) -> list[str]:
    """The names of `devices`; fails unless it is a sequence of devices."""
    __tracebackhide__ = True
    wanted = f"the names of the {len(expected)} device(s) Keras trains on here, {expected}"
    if devices is Ellipsis:
        fail(todo, "devices", f"not done yet: devices is still ... (Ellipsis). Expected {wanted}.")
    if isinstance(devices, str | bytes) or not isinstance(devices, Sequence | np.ndarray):
        fail(
            todo,
            "devices",
            f"expected a list: {wanted}; found {devices!r} ({type(devices).__name__}).",
        )
    return [_device_name(device) for device in devices]


def check_distribution(devices: Sequence, *, todo: int) -> None:
    """Checks `devices` (every device Keras trains on here) and, on JAX, the distribution set.

    Args:
        devices: the devices the TODO binds: names ("cpu:0"), JAX devices or TensorFlow's
            logical devices.
        todo: the TODO's number, named in every message.

    Raises:
        CheckFailed: naming the TODO, when `devices` leaves out a device, names another
            kind, or, on JAX, no `DataParallel` over exactly `devices` is set.

    Example:
        checks.check_distribution(devices, todo=1)
    """
    __tracebackhide__ = True
    expected = keras.distribution.list_devices()
    found = _device_names(devices, todo, expected)
    idle = [device for device in expected if device not in found]
    if idle and found and set(found) <= set(expected):
        fail(
            todo,
            "devices",
            f"expected all {len(expected)} devices Keras trains on here, "
            f"{expected}; found {len(found)}, {found}. The other {len(idle)} would sit idle: "
            "keras.distribution.list_devices() names them all.",
        )
    if sorted(found) != sorted(expected):
        fail(
            todo,
            "devices",
            f"expected the devices Keras trains on here, {expected}; found "
            f"{found}. keras.distribution.list_devices() names them (a TPU's or the GPUs, "
            "else the CPU's).",
        )
    live = ""
    if keras.backend.backend() == "jax":
        distribution = keras.distribution.distribution()
        if distribution is None:
            fail(
                todo,
                "devices",
                "expected fit() to train on every device; Keras has no "
                "distribution set. Make keras.distribution.DataParallel(devices=devices) "
                "and pass it to keras.distribution.set_distribution().",
            )
        if not isinstance(distribution, keras.distribution.DataParallel):
            fail(
                todo,
                "devices",
                f"expected a DataParallel distribution (a copy of the "
                f"model on each device, each batch split over them); found "
                f"{type(distribution).__name__}.",
            )
        mesh = [_device_name(device) for device in distribution.device_mesh.devices.flat]
        if sorted(mesh) != sorted(found):
            fail(
                todo,
                "devices",
                f"expected the distribution set over `devices`, {found}; "
                f"it is over {mesh}. Make it with DataParallel(devices=devices).",
            )
        live = "; keras.distribution.distribution() is a DataParallel over them"
    kinds = sorted({name.split(":")[0].upper() for name in found})
    passed(
        todo,
        f"all {len(found)} {'/'.join(kinds)} device(s) Keras trains on here, one "
        f"replica each{live}.",
    )


def _read(
    iterator: Iterator, count: int, keys: list | None = None, batches: list | None = None
) -> None:
    """Reads `count` (image, label) from batches; appends to `keys` each image's (key the
    same for its flips, key of this orientation), to `batches` each batch's flip-free keys."""
    while count > 0:
        images = np.asarray(next(iterator)[0])
        count -= len(images)
        if keys is None:
            continue
        hashes = [
            [
                hash(np.ascontiguousarray(v).tobytes())
                for v in (im, im[:, ::-1], im[::-1], im[::-1, ::-1])
            ]
            for im in images
        ]
        keys += [(min(h), h[0]) for h in hashes]
        batches.append([min(h) for h in hashes])


def _repeated_pairs(batches: list, per_epoch: int) -> float:
    """The share of pairs of images together in a batch of epoch 2 that were so in epoch 1."""
    pairs = [
        [p for b in epoch for p in itertools.combinations(sorted(b), 2)]
        for epoch in (batches[:per_epoch], batches[per_epoch : 2 * per_epoch])
    ]
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
    fail(
        todo,
        "make_training_dataset",
        "expected it to read the shards in `paths`, its "
        "argument; given paths of shards that do not exist, it still gave a batch: it reads "
        "other files. Read them with read_shards(), from a dataset of `paths`.",
    )


def check_training_dataset(
    make_training_dataset: Callable,
    paths: Sequence[str],
    *,
    todo: int,
    batch_size: int,
    image_size: int,
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
        image_size: the side of the images the batches must hold, in pixels.

    Raises:
        CheckFailed: naming the TODO, when the batches are not of static shape, the
            dataset ends, reads other shards than `paths`, later epochs read the shards
            again, repeat the first one's order or batches, are not flipped anew, or
            prefetch is not last (read from its graph).

    Example:
        checks.check_training_dataset(make_training_dataset, train_paths, todo=2,
                                      batch_size=16, image_size=96)
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
        num_images = sum(1 for _ in tf.data.TFRecordDataset(copies))  # One epoch.
        dataset = call_eagerly(
            make_training_dataset, (copies,), todo=todo, name=name, expected=expected
        )
        require_dataset(dataset, todo, name, expected)
        _check_batches(dataset, todo, name, (batch_size, image_size))
        if dataset.cardinality() != tf.data.INFINITE_CARDINALITY:
            fail(
                todo,
                name,
                "expected an endless dataset (fit() is told how many steps make "
                "an epoch); this one ends. Add repeat() after shuffle().",
            )
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
            fail(
                todo,
                name,
                "expected every epoch after the first to come from cache(); it "
                "read the shards again. Put cache() right after map(read_tfrecord), before "
                "repeat(): repeat() before cache() caches an endless stream that never "
                "replays.",
            )
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
            "first one's. " + (small_buffer or _same_order_hint(dataset)),
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
            ),
        )
    orientation = dict(first)
    seen_again = [(key, flipped) for key, flipped in second if key in orientation]
    if seen_again and all(orientation[key] == flipped for key, flipped in seen_again):
        fail(
            todo,
            name,
            f"expected the images flipped anew in each epoch; all "
            f"{len(seen_again)} images seen in both epochs came back exactly as before. Map "
            "augment after batch(), after cache().",
        )
    _check_prefetch_last(dataset, todo, name)
    untold = (
        ""
        if per_epoch >= MIN_BATCHES_TO_TELL
        else (
            f" (new batches in each epoch not checked: an epoch of {num_images} images holds "
            f"{per_epoch} batch{'es' * (per_epoch != 1)} of {batch_size}, and it takes "
            f"{MIN_BATCHES_TO_TELL} to tell)"
        )
    )
    passed(
        todo,
        f"endless batches of {batch_size} images of {(image_size, image_size, 3)}; "
        f"later epochs from the cache, each in a new order, flipped anew{untold}.",
    )


def _same_order_hint(dataset: tf.data.Dataset) -> str:
    """Why each epoch repeats the first one's order, read from the graph.

    Returns:
        The hint for no shuffle at all, for a shuffle before the cache, or (the graph
        unread, or neither) where the shuffle goes.
    """
    steps = [step.op for step in dataset_steps(dataset) or []]
    shuffles = [i for i, op in enumerate(steps) if op.startswith("Shuffle")]
    caches = [i for i, op in enumerate(steps) if op.startswith("Cache")]
    if steps and not shuffles:
        return "There is no shuffle(): add shuffle(2048, seed=SEED) after cache()."
    if shuffles and caches and max(shuffles) < min(caches):
        return "shuffle() after cache(): a cache after the shuffle replays the first epoch's order."
    return (
        "Shuffle after cache() with reshuffle_each_iteration left at its default, so that "
        "each epoch draws a new order."
    )


def _small_shuffle_buffer(dataset: tf.data.Dataset, batch_size: int) -> str:
    """The hint for a shuffle whose buffer (read from the graph) is at most a batch.

    Its images are drawn from their next few neighbours only.

    Returns:
        The hint; "" for no such shuffle (or no graph).
    """
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


def _check_batches(dataset: tf.data.Dataset, todo: int, name: str, sizes: tuple) -> None:
    """Fails unless the elements are (uint8 images, labels) of static batch shapes."""
    __tracebackhide__ = True
    batch_size, image_size = sizes
    specs = tf.nest.flatten(dataset.element_spec)
    if len(specs) != 2:
        fail(
            todo,
            name,
            f"expected (image, label) pairs; found {dataset.element_spec}. Parse each "
            "record with map(read_tfrecord).",
        )
    wanted = (batch_size, image_size, image_size, 3)
    images, labels = tuple(specs[0].shape), tuple(specs[1].shape)
    if images[:1] != (batch_size,) or labels[:1] != (batch_size,):
        fail(
            todo,
            name,
            f"expected batches of exactly {batch_size} images, a static size; found images "
            f"of shape {images} and labels {labels}. Batch with "
            "batch(global_batch_size, drop_remainder=True) so that every batch has the same, "
            "known size.",
        )
    if images != wanted:
        fail(
            todo,
            name,
            f"expected images of shape {wanted}; found {images}. Map augment over the "
            "batches (it resizes them to IMAGE_SIZE): map(augment) after batch().",
        )
    if specs[0].dtype != tf.uint8:
        fail(todo, name, f"expected uint8 images; found {specs[0].dtype.name}.")


def _check_prefetch_last(dataset: tf.data.Dataset, todo: int, name: str) -> None:
    """Fails unless the dataset's graph ends with prefetch() (options aside)."""
    __tracebackhide__ = True
    ops = dataset_ops(dataset)  # None: this TensorFlow's graph cannot be read.
    last = next((op for op in reversed(ops or []) if op not in _AFTER_PREFETCH), None)
    if ops is None or last == "PrefetchDataset":
        return
    where = "none" if "PrefetchDataset" not in ops else f"one, but {last} comes after it"
    fail(
        todo,
        name,
        f"expected prefetch(tf.data.AUTOTUNE) at the end; found {where}. Without "
        "it, the accelerator waits at every step while the CPU batches and augments the next "
        "batch: on a TPU each step then takes the input's time plus the compute's, instead "
        "of the longer of the two.",
    )
