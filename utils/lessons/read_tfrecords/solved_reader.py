"""Lab 3's reader as its solution writes it (TODOs 1 and 2), for the labs that read with it.

Labs 4 and 5 read their shards with the reader the learner wrote in lab 3; a lab uploaded
alone carries this module in its set-up cell. The statements are those of lab 3's solution
(notebooks/03_read_tfrecords.py), with what lab 3 takes from its own cells (`TARGET_SIZE`,
`class_names`, `NUM_PARALLEL_READS`, `open_tfrecord`) as arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tensorflow as tf


def lab3_reader(
    target_size: int,
    class_names: Sequence[str],
    *,
    num_parallel_reads: int = 16,
    open_tfrecord: Callable[[tf.Tensor], tf.data.Dataset] = tf.data.TFRecordDataset,
) -> tuple[Callable, Callable]:
    """Returns lab 3's `(read_tfrecord, read_shards)` for shards of `target_size` px images.

    Args:
        target_size: side of the stored images (lab 2's `TARGET_SIZE`).
        class_names: the classes; the one-hot label has one value per class.
        num_parallel_reads: files `read_shards` reads at once unless told otherwise.
        open_tfrecord: opens one shard: `tf.data.TFRecordDataset` reads it from disk or
            `gs://`.

    Returns:
        `read_tfrecord(serialized)`: one record parsed, (uint8 image of shape
        (target_size, target_size, 3), float32 one-hot label); and
        `read_shards(filenames, num_parallel_reads=...)`: every record of the files named
        in the dataset `filenames`, that many files at once, each record as it arrives.

    Example:
        read_tfrecord, read_shards = solved_reader.lab3_reader(192, class_names)
        records = read_shards(tf.data.Dataset.from_tensor_slices(shard_paths))
        images_and_labels = records.map(read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE)
    """
    features = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "class": tf.io.FixedLenFeature([], tf.int64),
        "one_hot_class": tf.io.VarLenFeature(tf.float32),
        "size": tf.io.FixedLenFeature([2], tf.int64, default_value=[0, 0]),
    }

    def read_tfrecord(serialized):
        """Parses one record; returns (uint8 image of static shape, float32 one-hot label)."""
        record = tf.io.parse_single_example(serialized, features)
        image = tf.io.decode_jpeg(record["image"], channels=3)
        image = tf.reshape(image, [target_size, target_size, 3])
        one_hot = tf.sparse.to_dense(record["one_hot_class"])
        one_hot = tf.reshape(one_hot, [len(class_names)])
        return image, one_hot

    def read_shards(filenames, num_parallel_reads=num_parallel_reads):
        """Every record of the files in `filenames` (a dataset of paths), many at once."""
        return filenames.interleave(
            open_tfrecord,
            cycle_length=num_parallel_reads,
            num_parallel_calls=num_parallel_reads,
            deterministic=False,
        )

    return read_tfrecord, read_shards
