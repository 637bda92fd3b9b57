"""Checks for lab 3: parse a record, read shards in parallel, parse in batches, prefetch.

The parallel reading's and the fast pipeline's checks are in `read_tfrecords_parallel`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from utils import records
from utils.checks._base import (
    CHECK_ERRORS,
    fail,
    first_line,
    passed,
    require_result,
)
from utils.checks.read_tfrecords_parallel import (
    check_fast_dataset,
    check_parallel_records,
    raise_if_data_problem,
)

__all__ = [
    "check_fast_dataset",
    "check_parallel_records",
    "check_parse_batch",
    "check_read_tfrecord",
]


def _sample_records(shard_paths: Sequence[str], count: int, todo: int) -> list[bytes]:
    """The first `count` records of the first shard; a damaged shard is a `DataProblem`."""
    __tracebackhide__ = True
    try:
        records = tf.data.TFRecordDataset(list(shard_paths)[:1]).take(count)
        return list(records.as_numpy_iterator())
    except tf.errors.OpError as error:
        raise_if_data_problem(error, todo, list(shard_paths)[:1])
        raise


def _expected_pairs(serialized: Sequence[bytes]):
    parsed = [records.parse_record(tf.constant(r)) for r in serialized]
    images = [tf.io.decode_jpeg(p["image"], channels=3).numpy() for p in parsed]
    return images, [int(p["class"]) for p in parsed]


def check_read_tfrecord(
    read_tfrecord: Callable,
    features: Any,
    *,
    todo: int,
    shard_paths: Sequence[str],
    target_size: int,
    num_classes: int,
) -> None:
    """Checks `features` (the parsing spec) and `read_tfrecord(serialized) -> (image, one_hot)`.

    Args:
        read_tfrecord: the learner's function, run eagerly once, then in `Dataset.map`.
        features: the learner's parsing spec; expected a dict of `tf.io` features.
        todo: the TODO's number, named in every message.
        shard_paths: the shards; the first records of the first one are parsed.
        target_size: the side of the images in the shards, in pixels.
        num_classes: the length of the one-hot labels.

    Raises:
        CheckFailed: naming the TODO, when the spec misses a feature or a default, the
            shapes are not static, or the images or labels differ from the records'.
        DataProblem: when the first shard is damaged (not the TODO's fault).

    Example:
        checks.check_read_tfrecord(read_tfrecord, features, todo=1, shard_paths=shards,
                                   target_size=192, num_classes=5)
    """
    __tracebackhide__ = True
    name = "read_tfrecord"
    if features is Ellipsis or read_tfrecord is Ellipsis:
        fail(todo, name, "not done yet: features is still ... (Ellipsis). Expected a dict.")
    if not isinstance(features, dict):
        fail(todo, name, f"expected `features` to be a dict; found a {type(features).__name__}.")
    wanted_types = {
        "image": tf.io.FixedLenFeature,
        "class": tf.io.FixedLenFeature,
        "one_hot_class": tf.io.VarLenFeature,
        "size": tf.io.FixedLenFeature,
    }
    for key, kind in wanted_types.items():
        if not isinstance(features.get(key), kind):
            found = type(features.get(key)).__name__
            fail(todo, name, f"expected features[{key!r}] to be a {kind.__name__}; found {found}.")
    if features["size"].default_value is None:
        fail(
            todo,
            name,
            "expected features['size'] to have a default_value (such as [0, 0]), so that "
            "records written without it still parse.",
        )
    without_size = records.to_example(b"", 0, [1, 1], ["a"])
    del without_size.features.feature["size"]
    try:
        tf.io.parse_single_example(without_size.SerializeToString(), features)
    except CHECK_ERRORS as error:
        fail(todo, name, f"a record without 'size' does not parse: {first_line(error)}")

    serialized = _sample_records(shard_paths, 8, todo)
    expected = f"(uint8 image of shape ({target_size}, {target_size}, 3), one-hot label)"
    try:
        result = read_tfrecord(tf.constant(serialized[0]))
        require_result(result, todo, name, expected)
        pairs = tf.data.Dataset.from_tensor_slices(serialized).map(read_tfrecord)
        found = list(pairs.as_numpy_iterator())
    except CHECK_ERRORS as error:
        fail(todo, name, f"expected {expected}; found an error: {first_line(error)}")
    image_spec, label_spec = tf.nest.flatten(pairs.element_spec)[:2]
    if image_spec.dtype != tf.uint8 or image_spec.shape != (target_size, target_size, 3):
        fail(
            todo,
            name,
            f"expected images of static shape ({target_size}, {target_size}, 3) and dtype "
            f"uint8; found {image_spec}. Decode with channels=3, then tf.reshape to that shape "
            "so that Keras and the TPU know the shape before running.",
        )
    if label_spec.shape != (num_classes,) or label_spec.dtype != tf.float32:
        fail(
            todo,
            name,
            f"expected one-hot labels of static shape ({num_classes},), float32; found "
            f"{label_spec}. Use tf.sparse.to_dense, then tf.reshape to [{num_classes}].",
        )
    images, classes = _expected_pairs(serialized)
    for (image, label), right_image, right_class in zip(found, images, classes, strict=True):
        if not np.array_equal(image, right_image) or int(np.argmax(label)) != right_class:
            fail(todo, name, "the images or labels differ from what the records hold.")
    passed(todo, f"{len(found)} records parsed to {expected}.")


def check_parse_batch(
    parse_batch: Callable, *, todo: int, read_tfrecord: Callable, shard_paths: Sequence[str]
) -> None:
    """Checks `parse_batch(serialized_batch)` gives what `read_tfrecord` gives, batched.

    Args:
        parse_batch: the learner's function, run eagerly once, then in `Dataset.map`.
        todo: the TODO's number, named in every message.
        read_tfrecord: the reference, one record at a time (TODO 1's).
        shard_paths: the shards; the first records of the first one are parsed.

    Raises:
        CheckFailed: naming the TODO, when the batch's shapes are not static or a record
            of the batch differs from `read_tfrecord`'s.
        DataProblem: when the first shard is damaged (not the TODO's fault).

    Example:
        checks.check_parse_batch(parse_batch, todo=3, read_tfrecord=read_tfrecord,
                                 shard_paths=shards)
    """
    __tracebackhide__ = True
    name = "parse_batch"
    expected = "(images of shape (batch, size, size, 3), one-hot labels of shape (batch, classes))"
    records = _sample_records(shard_paths, 6, todo)
    try:
        result = parse_batch(tf.constant(records))
        require_result(result, todo, name, expected)
        batches = tf.data.Dataset.from_tensor_slices(records).batch(3).map(parse_batch)
        found = list(batches.as_numpy_iterator())
    except CHECK_ERRORS as error:
        fail(
            todo,
            name,
            f"expected {expected}, parsed with tf.io.parse_example; found an error: "
            f"{first_line(error)}",
        )
    image_spec, label_spec = tf.nest.flatten(batches.element_spec)[:2]
    single = tf.data.Dataset.from_tensor_slices(records).map(read_tfrecord).element_spec
    if image_spec.shape[1:] != single[0].shape or label_spec.shape[1:] != single[1].shape:
        fail(
            todo,
            name,
            f"expected batches of static shape (None, *{tuple(single[0].shape)}) and (None, "
            f"*{tuple(single[1].shape)}); found {image_spec.shape} and {label_spec.shape}.",
        )
    images = np.concatenate([batch[0] for batch in found])
    labels = np.concatenate([batch[1] for batch in found])
    for index, record in enumerate(records):
        image, label = read_tfrecord(tf.constant(record))
        if not np.array_equal(images[index], image) or not np.array_equal(labels[index], label):
            fail(todo, name, f"record {index} of the batch differs from read_tfrecord's.")
    passed(todo, f"{len(records)} records in batches of 3 match read_tfrecord, one by one.")
