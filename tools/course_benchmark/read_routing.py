"""The benchmark's read routing: `tf.io.read_file` sent through a simulated storage.

Keras's `image_dataset_from_directory` reads each file with `tf.io.read_file` on its own;
to charge those reads the storage's waits, the benchmark swaps that function process-wide
while the dataset is built (a dataset built inside the block keeps paying after it). No
lesson needs this: the lessons read through `SimulatedStorage.read_file` and
`SimulatedStorage.tfrecord_dataset` directly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import tensorflow as tf

from utils.storage import SimulatedStorage


@contextlib.contextmanager
def routing_tf_read_file(storage: SimulatedStorage) -> Iterator[SimulatedStorage]:
    """Routes `tf.io.read_file` itself through `storage` while the block runs.

    The storage itself reads with its `read_bytes`, so it does not call itself.

    Args:
        storage: the simulated storage that charges each read.

    Yields:
        `storage`.

    Example:
        with read_routing.routing_tf_read_file(storage):
            dataset = keras.utils.image_dataset_from_directory(folder)
    """
    original = tf.io.read_file
    tf.io.read_file = storage.read_file
    try:
        yield storage
    finally:
        tf.io.read_file = original
