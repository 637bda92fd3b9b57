"""One image as a TFRecord: the record's schema, the image transforms, and building and parsing it.

These are the course's reference versions of lab 2's first three TODOs; `conversion.convert`
and `beam_conversion` run them, and lab 3 parses what they wrote with `parse_record`.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

DEFAULT_TARGET_SIZE = 192
DEFAULT_JPEG_QUALITY = 90
# How each record is parsed: the declared schema. `one_hot_class` has one float per class.
FEATURES = {
    "image": tf.io.FixedLenFeature([], tf.string),
    "class": tf.io.FixedLenFeature([], tf.int64),
    "label": tf.io.FixedLenFeature([], tf.string),
    "size": tf.io.FixedLenFeature([2], tf.int64),
    "one_hot_class": tf.io.VarLenFeature(tf.float32),
}
SCHEMA = {
    "image": "bytes: the JPEG-encoded image, TARGET_SIZE x TARGET_SIZE x 3",
    "class": "int64: the class index",
    "label": "bytes: the class name",
    "size": "int64 x 2: the ORIGINAL image's height and width, before resizing",
    "one_hot_class": "float x number of classes (variable length): 1.0 at the class index",
}


def resize_and_crop(image: tf.Tensor, target_size: int) -> tf.Tensor:
    """Resizes `image` so its shorter side is `target_size`, then crops the centre square.

    Args:
        image: a uint8 image tensor of shape (height, width, 3).
        target_size: side of the square result, in pixels.

    Returns:
        A uint8 tensor of shape (target_size, target_size, 3).
    """
    size = tf.cast(tf.shape(image)[:2], tf.float32)
    scale = target_size / tf.reduce_min(size)
    new_size = tf.maximum(tf.cast(tf.round(size * scale), tf.int32), target_size)
    resized = tf.image.resize(image, new_size, antialias=True)
    cropped = tf.image.resize_with_crop_or_pad(resized, target_size, target_size)
    return tf.saturate_cast(tf.round(cropped), tf.uint8)


def recompress(image: tf.Tensor, quality: int) -> tf.Tensor:
    """Encodes an image as JPEG.

    Args:
        image: a uint8 image tensor of shape (height, width, 3).
        quality: JPEG quality, 0-100.

    Returns:
        A scalar string tensor: the JPEG bytes.
    """
    return tf.io.encode_jpeg(image, quality=quality, optimize_size=True)


def to_example(
    image_jpeg: bytes, class_index: int, original_size: Sequence[int], class_names: Sequence[str]
) -> tf.train.Example:
    """Builds the record of one image, with the fields of `SCHEMA`.

    Args:
        image_jpeg: the recompressed JPEG bytes.
        class_index: the index of the image's class in `class_names`.
        original_size: the image's (height, width) before resizing.
        class_names: all class names, in label order.

    Returns:
        A `tf.train.Example`; call `.SerializeToString()` to write it.
    """
    one_hot = [0.0] * len(class_names)
    one_hot[class_index] = 1.0
    feature = {
        "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image_jpeg])),
        "class": tf.train.Feature(int64_list=tf.train.Int64List(value=[class_index])),
        "label": tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[class_names[class_index].encode()])
        ),
        "size": tf.train.Feature(int64_list=tf.train.Int64List(value=list(original_size))),
        "one_hot_class": tf.train.Feature(float_list=tf.train.FloatList(value=one_hot)),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature))


def parse_record(serialized: tf.Tensor) -> dict:
    """Parses one record with `FEATURES`.

    Args:
        serialized: a scalar string tensor, one serialized `tf.train.Example`.

    Returns:
        A dict of tensors, one per feature of `FEATURES`; `one_hot_class` comes back dense.

    Raises:
        tf.errors.InvalidArgumentError: if the record lacks a feature without a default
            or holds one of another type.
    """
    record = tf.io.parse_single_example(serialized, FEATURES)
    record["one_hot_class"] = tf.sparse.to_dense(record["one_hot_class"])
    return record
