"""A conversion's images loaded in one parallel pipeline: read, decoded, resized, recompressed."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import tensorflow as tf

from utils import comparison, errors, records, timing

# Images timed per run of one format: at most this many (a JPEG decodes in a millisecond).
MAX_TIMED_PER_FORMAT = 2000


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


def encoded_by_format(encoded_images: Sequence[bytes]) -> dict[str, list[bytes]]:
    """Groups images' bytes by their format (`records.image_format`), commonest first.

    Args:
        encoded_images: the files' bytes.

    Returns:
        {format: its images' bytes}; bytes of no known format under "other".
    """
    groups: dict[str, list[bytes]] = {}
    for encoded in encoded_images:
        groups.setdefault(records.image_format(encoded) or "other", []).append(encoded)
    return dict(sorted(groups.items(), key=lambda item: -len(item[1])))


def decode_as_converted(image_bytes: tf.Tensor, min_side: int | None = None) -> tf.Tensor:
    """Decodes one image as the conversion does: upright, in sRGB, any format it reads.

    Args:
        image_bytes: a scalar string tensor, the file's bytes.
        min_side: as for `records.decode_upright` (a large JPEG decoded at a reduced scale).

    Returns:
        The uint8 image (height, width, 3).
    """
    image, _ = records.decode_upright(image_bytes, min_side=min_side)
    return records.to_srgb(image, image_bytes)


def rates_by_format(
    by_format: dict[str, list[bytes]],
    prepare: Callable[[tf.Tensor], tf.Tensor] = decode_as_converted,
    *,
    seconds: float = 1.0,
    repeats: int = 3,
) -> dict[str, comparison.RepeatedResult]:
    """Times `prepare` on each format's images in memory, on all cores, formats in turns.

    A HEIC photo can cost 30 times a JPEG: each format's run holds as many images as
    `seconds` of its own work, from one image timed first (at least 2, at most
    `MAX_TIMED_PER_FORMAT`), so that no format's run lasts minutes.

    Args:
        by_format: {format: encoded images} (`encoded_by_format`).
        prepare: what is timed on one image's bytes (default: `decode_as_converted`).
        seconds: about how long one run of each format lasts.
        repeats: rounds, formats taken in turns (`comparison.measure_in_turns`).

    Returns:
        {format: images/s, `comparison.RepeatedResult`}, quietly (nothing printed).

    Raises:
        ValueError: if `by_format` holds no image, or an image does not decode.
    """
    if not any(by_format.values()):
        raise ValueError("`by_format` must hold at least one image. Received: no images")
    cores = os.cpu_count() or 1
    timers = {}
    with errors.decoder_messages():
        for name, encoded in by_format.items():
            if not encoded:
                continue
            prepare(tf.constant(encoded[0]))  # Warm-up: the ops' first run.
            start = time.perf_counter()
            prepare(tf.constant(encoded[0]))
            each = max(time.perf_counter() - start, 1e-5)
            count = min(max(math.ceil(seconds * cores / each), 2), MAX_TIMED_PER_FORMAT)
            dataset = tf.data.Dataset.from_tensor_slices(encoded).repeat()
            dataset = dataset.map(prepare, num_parallel_calls=tf.data.AUTOTUNE)
            timers[name] = timing.throughput_timer(dataset, num_images=count)
        with contextlib.redirect_stdout(io.StringIO()):
            return comparison.measure_in_turns(timers, repeats=repeats)


def describe_rates(rates: dict[str, comparison.RepeatedResult], counts: dict[str, int]) -> str:
    """One line: each format's images/s and how many images of it, and its cost against JPEG.

    Args:
        rates: {format: images/s} (`rates_by_format`).
        counts: {format: images of it in the folder or the sample}.

    Returns:
        As "JPEG 1,020 images/s (180 images), HEIC 160 images/s (20 images): HEIC takes
        6.4x as long as JPEG"; the costs are said only when JPEG is among the formats.
    """
    parts = [
        f"{name} {_rate(rates[name].median)} images/s ({counts.get(name, 0):,} images)"
        for name in rates
    ]
    text = ", ".join(parts)
    if "JPEG" in rates:
        jpeg = rates["JPEG"].median
        costs = [
            f"{name} takes {jpeg / rates[name].median:.1f}x as long as JPEG"
            for name in rates
            if name != "JPEG" and rates[name].median
        ]
        if costs:
            text += ": " + "; ".join(costs)
    return text


def _rate(images_per_second: float) -> str:
    """A rate with the digits that tell formats apart: "1,020", "8.4", "0.31"."""
    if images_per_second >= 100:
        return f"{images_per_second:,.0f}"
    return f"{images_per_second:.1f}" if images_per_second >= 1 else f"{images_per_second:.2f}"
