"""Samples that stand for a data set: drawn from every class in turn, counted by class."""

from __future__ import annotations

import collections
import itertools
from collections.abc import Sequence

import numpy as np


def _class_of(path: str) -> str:
    return str(path).replace("\\", "/").rsplit("/", 2)[-2]


def paths_from_every_class(paths: Sequence[str]) -> list[str]:
    """Orders `paths` so that any first N of them draw from every class folder in turn.

    A sample that stands for the data set must hold every class: the first 200 of a
    sorted listing are all one class's.

    Args:
        paths: image paths, `<root>/<class>/<name>`.

    Returns:
        The same paths, round robin over their parent folders (each folder's own order
        kept): one of each class, then the second of each, and so on.

    Example:
        sample_paths = sampling.paths_from_every_class(paths)
        sample, _, _ = readable_images.readable_sample(sample_paths, 200)
    """
    by_class: dict[str, list[str]] = {}
    for path in paths:
        by_class.setdefault(_class_of(path), []).append(path)
    rounds = itertools.zip_longest(*by_class.values())
    return [path for round_paths in rounds for path in round_paths if path is not None]


def count_classes(paths: Sequence[str]) -> dict[str, int]:
    """Counts `paths` by their parent folder (the class).

    Args:
        paths: image paths, `.../<class>/<file>`.

    Returns:
        {class folder: number of paths}, sorted by name.
    """
    return dict(sorted(collections.Counter(_class_of(path) for path in paths).items()))


def mean_bytes(encoded_images: list[bytes]) -> float:
    """The mean length, in bytes, of some encoded images.

    Args:
        encoded_images: the images' encoded bytes (JPEG, PNG ...).

    Returns:
        The mean length in bytes.
    """
    return float(np.mean([len(encoded) for encoded in encoded_images]))


def count_shard_classes(paths: Sequence[str], class_names: Sequence[str]) -> dict[str, int]:
    """Counts the records of some TFRecord shards by class (their `class` feature).

    Args:
        paths: the shards (lab 2's records).
        class_names: the classes, in the order of their indices.

    Returns:
        {class name: records of it}, every class named, in index order (0 for a class
        with none).
    """
    import tensorflow as tf  # Imported here: the other functions need only NumPy.

    feature = {"class": tf.io.FixedLenFeature([], tf.int64)}
    counts = np.zeros(len(class_names), np.int64)
    records = tf.data.TFRecordDataset(list(paths)).batch(1024)
    for batch in records.map(lambda serialized: tf.io.parse_example(serialized, feature)["class"]):
        counts += np.bincount(batch.numpy(), minlength=len(class_names))[: len(class_names)]
    return {name: int(count) for name, count in zip(class_names, counts, strict=True)}
