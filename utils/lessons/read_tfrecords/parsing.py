"""What lab 3's TODO 1 leaves to its reader: a missing feature, a sparse one, an unknown shape.

Lab 3's text says why its reader declares a default, makes the label dense and reshapes
the image; `describe_parsing` prints what parsing and decoding give without those steps.
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf


def describe_parsing(features: dict, read_tfrecord: Callable, shard_path: str) -> str:
    """Two lines on the records of `shard_path`, parsed with `features`.

    The first: what its first record, stripped of its "size" feature (the original
    course's records have none), parses to. The second: the image's shape as `tf.data`
    knows it before any record is read, decoded straight from the parsed JPEG and as
    `read_tfrecord` returns it.

    Args:
        features: lab 3's feature declarations, "size" and "one_hot_class" among them.
        read_tfrecord: lab 3's `read_tfrecord(serialized)`, returning (image, label).
        shard_path: one TFRecord shard.

    Returns:
        Two lines, e.g. 'A record without "size" parses to size [0, 0]; "one_hot_class"
        parses to a SparseTensor.' and "Image shape known before reading: decoded
        (None, None, 3); from read_tfrecord (192, 192, 3)."

    Example:
        print(parsing.describe_parsing(features, read_tfrecord, shards.paths[0]))
    """
    records = tf.data.TFRecordDataset(shard_path)
    example = tf.train.Example.FromString(next(iter(records)).numpy())
    del example.features.feature["size"]
    label = features.get("one_hot_class")
    sparse = isinstance(label, tf.io.VarLenFeature)
    label_kind = "a SparseTensor" if sparse else "a dense Tensor"
    label_line = f'"one_hot_class" parses to {label_kind}.' if label is not None else ""
    if "size" not in features:  # Not declared: parsing skips it in every record.
        size_line = 'Your features leave "size" out: a record without it parses all the same;'
    else:
        try:
            parsed = tf.io.parse_single_example(example.SerializeToString(), features)
            size_line = f'A record without "size" parses to size {parsed["size"].numpy().tolist()};'
        except tf.errors.InvalidArgumentError:  # Declared without a default_value.
            size_line = 'A record without "size" fails to parse: it has no default_value;'

    def decode(serialized):
        jpeg = tf.io.parse_single_example(serialized, features)["image"]
        return tf.io.decode_jpeg(jpeg, channels=3)

    decoded = records.map(decode).element_spec.shape
    reshaped = records.map(read_tfrecord).element_spec[0].shape
    return (
        f"{size_line} {label_line}".strip() + "\n"
        f"Image shape known before reading: decoded {tuple(decoded)}; "
        f"from read_tfrecord {tuple(reshaped)}."
    )
