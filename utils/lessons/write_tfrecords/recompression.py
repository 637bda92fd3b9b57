"""Measures what recompressing JPEGs buys: fewer bytes, faster decoding, at what quality.

Lab 2 recompresses the resized images with the learner's own `recompress` function (its
sample is drawn from every class by `utils.sampling`); the functions here time decoding the
results (in turns, with `comparison.measure_in_turns`), encode at several JPEG qualities and
measure the PSNR.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from utils import timing


def encode_at_qualities(
    images: Sequence[tf.Tensor | np.ndarray], recompress: Callable, qualities: list[int]
) -> dict[int, list[bytes]]:
    """Recompresses `images` at each quality.

    Args:
        images: uint8 images (tensors or arrays), all of one size.
        recompress: `recompress(image, quality)`, returning a scalar string tensor.
        qualities: the JPEG qualities to try.

    Returns:
        {quality: the images' JPEG bytes at that quality}, in the order of `qualities`.
    """
    return {
        quality: [recompress(image, quality).numpy() for image in images] for quality in qualities
    }


def decode_timer(encoded_images: list[bytes], *, num_images: int) -> Callable[[], float]:
    """Returns a function that times decoding in-memory JPEGs on all cores, quietly.

    For `comparison.measure_in_turns`: each call decodes `num_images` of `encoded_images`
    (cycling through them, after one warm-up element) and returns images/s.

    Args:
        encoded_images: the JPEG bytes.
        num_images: images decoded per call (make a run last about a second or more: a
            run of 0.1 s is mostly noise).

    Returns:
        A function of no arguments that returns images/s.

    Raises:
        ValueError: if `encoded_images` is empty.

    Example:
        runs = comparison.measure_in_turns({"originals": recompression.decode_timer(jpegs,
                                                                               num_images=2000)})
    """
    if not encoded_images:
        raise ValueError("`encoded_images` must hold at least one JPEG. Received: []")
    decoded = tf.data.Dataset.from_tensor_slices(encoded_images).repeat()
    decoded = decoded.map(
        lambda jpeg: tf.io.decode_jpeg(jpeg, channels=3), num_parallel_calls=tf.data.AUTOTUNE
    )
    return timing.throughput_timer(decoded, num_images=num_images)


def mean_psnr(images: Sequence[tf.Tensor | np.ndarray], encoded_images: list[bytes]) -> float:
    """Returns the PSNR, in dB, of the JPEGs in `encoded_images` against their images.

    The squared error is averaged over every pixel of every image first, then turned into
    one PSNR: a flat image that a JPEG encodes exactly has an infinite PSNR of its own,
    which would make a mean of per-image PSNRs infinite.

    Args:
        images: uint8 images (tensors or arrays).
        encoded_images: the same images as JPEG bytes, in the same order.

    Returns:
        The peak signal-to-noise ratio (above about 35 dB, differences are hard to see);
        infinite only when every JPEG decodes to its image exactly.

    Raises:
        ValueError: if the two lists differ in length.
    """
    decoded = [tf.io.decode_jpeg(jpeg, channels=3) for jpeg in encoded_images]
    if len(decoded) != len(images):
        raise ValueError(
            f"`images` and `encoded_images` must be as long. Received: {len(images)} and "
            f"{len(decoded)}"
        )
    squared_errors = [
        np.mean((np.asarray(image, np.float64) - np.asarray(jpeg, np.float64)) ** 2)
        for image, jpeg in zip(images, decoded, strict=True)
    ]
    mean_squared_error = float(np.mean(squared_errors))
    return math.inf if mean_squared_error == 0 else 10 * math.log10(255**2 / mean_squared_error)
