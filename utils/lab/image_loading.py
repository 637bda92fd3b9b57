"""A conversion's images loaded in one parallel pipeline: read, decoded, resized, recompressed."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from utils import errors, records


@dataclasses.dataclass(frozen=True)
class LoadedImage:
    """One image read, decoded, resized and recompressed, ready to become a record."""

    path: str
    num_bytes: int
    jpeg: bytes
    class_index: int
    original_size: list[int]
    composited: bool = False  # Transparent pixels composited on white (`decode_upright`).


def load_images(
    paths: Sequence[str],
    class_names: Sequence[str],
    *,
    resize_and_crop: Callable,
    recompress: Callable,
    target_size: int,
    jpeg_quality: int,
) -> Iterator[LoadedImage]:
    """Yields each image of `paths` that loads, in order; one that fails is left out.

    One pipeline over every image decodes them in parallel on all cores; the caller
    accounts for the images left out (`why_unreadable`).

    Args:
        paths: the images; each one's class is the name of its folder.
        class_names: the classes, in the order of their indices.
        resize_and_crop: the function that makes an image square (lab 2's given code).
        recompress: the function that encodes it as a JPEG (lab 2's given code).
        target_size: side of the square images, in pixels.
        jpeg_quality: JPEG quality of the recompressed images, 0-100.

    Yields:
        A `LoadedImage` for each image that loads.
    """
    load = functools.partial(
        _load_image,
        class_table=_class_table(class_names),
        transform=lambda image: recompress(resize_and_crop(image, target_size), jpeg_quality),
        target_size=target_size,
    )
    images = tf.data.Dataset.from_tensor_slices(paths).map(
        load, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
    )
    for (
        path,
        num_bytes,
        jpeg,
        class_index,
        size,
        composited,
    ) in images.ignore_errors().as_numpy_iterator():
        yield LoadedImage(
            path.decode(), int(num_bytes), jpeg, int(class_index), size.tolist(), bool(composited)
        )


def _load_image(
    path: tf.Tensor,
    *,
    class_table: tf.lookup.StaticHashTable,
    transform: Callable,
    target_size: int,
) -> tuple[tf.Tensor, ...]:
    """Reads and transforms one image in the graph; returns its fields as tensors."""
    image_bytes = tf.io.read_file(path)
    # Upright as a photo viewer shows it (EXIF Orientation), and a large JPEG decoded at
    # 1/2, 1/4 or 1/8 of its size where its shorter side keeps `target_size` pixels.
    image, original_size = records.decode_upright(image_bytes, min_side=target_size)
    image = records.to_srgb(image, image_bytes)  # An Adobe RGB photo's colours as shown.
    class_index = class_table.lookup(tf.strings.split(path, "/")[-2])
    header = tf.strings.substr(image_bytes, 0, 65536)
    composited = tf.numpy_function(_has_transparency, [header], tf.bool, stateful=False)
    jpeg = transform(image)
    return path, tf.strings.length(image_bytes), jpeg, class_index, original_size, composited


def _has_transparency(header: bytes) -> np.bool_:
    """`records.has_transparency` for `tf.numpy_function`."""
    return np.bool_(records.has_transparency(header))


def _class_table(class_names: Sequence[str]) -> tf.lookup.StaticHashTable:
    """A lookup from class name to class index, run in the graph (-1 for an unknown name)."""
    initializer = tf.lookup.KeyValueTensorInitializer(
        tf.constant(list(class_names)), tf.range(len(class_names), dtype=tf.int64)
    )
    return tf.lookup.StaticHashTable(initializer, default_value=-1)


def why_unreadable(path: str) -> str:
    """Says why reading and decoding `path` fails: the first line of its error.

    What TensorFlow's decoder logged meanwhile (`Premature end of JPEG data`) is added in
    parentheses, rather than left on stderr as a raw log line.

    Args:
        path: an image that `load_images` left out.

    Returns:
        The error's first line, and what the decoder logged.
    """
    with errors.decoder_messages() as logged:
        try:
            records.decode_upright(tf.io.read_file(path))
            why = "it decodes on its own, but failed in the pipeline (resize or recompress)"
        except tf.errors.OpError as error:
            why = errors.error_message(error)
    return why + (f" (the decoder logged: {'; '.join(logged)})" if logged else "")
