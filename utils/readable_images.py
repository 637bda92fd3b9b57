"""Image files: which files the course reads as images, and a sample of those that decode."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from utils import errors

if TYPE_CHECKING:
    import numpy as np

# The image types the course reads, in any letter case: `tf.io.decode_jpeg` decodes PNG
# too, and the conversion (`records.decode_upright`) HEIC photos through pillow-heif.
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".heic", ".heif")
# Why a sample leaves a HEIC photo out: the lessons decode their samples with TensorFlow.
HEIC_IN_SAMPLE = (
    "a HEIC (iPhone) photo, which tf.io.decode_jpeg does not read (lab 2's conversion "
    "does, through pillow-heif)"
)


def is_image_file(path: str | os.PathLike) -> bool:
    """Tells whether the course reads a file as an image, from its name alone.

    Args:
        path: a file path or name.

    Returns:
        True when its extension is one of `IMAGE_EXTENSIONS`, in any case (a HEIC photo
        named `.jpg` is known by its bytes when it is decoded).
    """
    return Path(path).suffix.lower() in IMAGE_EXTENSIONS


def readable_sample(
    paths: Sequence[str | bytes], count: int, *, verbose: bool = True
) -> tuple[list[str], list[np.ndarray], list[tuple[str, str]]]:
    """Returns the first `count` of `paths` that decode as images, upright, with the ones skipped.

    A learner's folder may hold files that do not decode (truncated, empty, not an
    image); a cell that shows or checks a sample must not stop at the first of them.
    HEIC photos are skipped too: the lessons decode a sample with `tf.io.decode_jpeg`.

    Args:
        paths: image paths (strings or bytes), in the order to try them.
        count: how many readable images to return.
        verbose: print one line per file skipped.

    Returns:
        (paths, images, skipped): the readable paths, their uint8 images (height, width, 3),
        and a (path, error) pair for each file skipped on the way.

    Example:
        sample_paths, sample_images, skipped = readable_images.readable_sample(source.paths, 8)
    """
    import tensorflow as tf  # Imported here: the other functions do not need TensorFlow.

    from utils import records

    readable, images, skipped = [], [], []
    with errors.decoder_messages():  # Its log line repeats the error.
        for path in paths:
            if len(readable) == count:
                break
            path = path.decode() if isinstance(path, bytes) else str(path)
            try:
                image_bytes = tf.io.read_file(path)
                if records.is_heic(image_bytes.numpy()[:64]):
                    skipped.append((path, HEIC_IN_SAMPLE))
                    continue
                image = records.decode_upright(image_bytes)[0].numpy()  # As shown.
            except tf.errors.OpError as error:
                skipped.append((path, errors.error_message(error)))
                continue
            readable.append(path)
            images.append(image)
    if verbose:
        for path, error in skipped:
            print(f"Skipped in the sample (does not decode): {path}: {error}")
    return readable, images, skipped
