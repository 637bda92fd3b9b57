"""Measures what recompressing JPEGs buys: fewer bytes, faster decoding, at what quality.

Lab 2 recompresses the resized images with the learner's own `recompress` function; the
functions here time decoding the results and sweep the JPEG quality.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from utils import timing


def decode_rate(encoded_images: list[bytes], label: str) -> timing.ThroughputResult:
    """Times decoding in-memory JPEGs, one per element, on all cores.

    Args:
        encoded_images: the JPEG bytes, decoded four times over (warm-up excluded).
        label: what the result is called.

    Returns:
        The `timing.ThroughputResult` (printed by `timing.measure_throughput`).

    Raises:
        ValueError: if `encoded_images` is empty.
    """
    if not encoded_images:
        raise ValueError("`encoded_images` must hold at least one JPEG. Received: []")
    decoded = tf.data.Dataset.from_tensor_slices(encoded_images).repeat()
    decoded = decoded.map(
        lambda jpeg: tf.io.decode_jpeg(jpeg, channels=3), num_parallel_calls=tf.data.AUTOTUNE
    )
    return timing.measure_throughput(decoded, num_images=4 * len(encoded_images), label=label)


def mean_bytes(encoded_images: list[bytes]) -> float:
    """Returns the mean size of some encoded images.

    Args:
        encoded_images: the encoded images' bytes.

    Returns:
        Their mean length, in bytes.
    """
    return float(np.mean([len(encoded) for encoded in encoded_images]))


def sweep_qualities(
    images: Sequence[tf.Tensor | np.ndarray], recompress: Callable, qualities: list[int]
) -> tuple[list[float], list[float]]:
    """Recompresses `images` at each quality: kilobytes per image and decoding speed.

    Args:
        images: uint8 images (tensors or arrays), all of one size.
        recompress: `recompress(image, quality)`, returning a scalar string tensor.
        qualities: the JPEG qualities to try.

    Returns:
        (mean kilobytes per image, images/s decoded) for each quality, in order.
    """
    kilobytes, rates = [], []
    for quality in qualities:
        encoded = [recompress(image, quality).numpy() for image in images]
        kilobytes.append(mean_bytes(encoded) / 1e3)
        label = f"decode, resized, quality {quality}"
        rates.append(decode_rate(encoded, label).images_per_second)
    return kilobytes, rates


def mean_psnr(images: Sequence[tf.Tensor | np.ndarray], encoded_images: list[bytes]) -> float:
    """Returns the mean PSNR, in dB, of each JPEG in `encoded_images` against its image.

    Args:
        images: uint8 images (tensors or arrays).
        encoded_images: the same images as JPEG bytes, in the same order.

    Returns:
        The mean peak signal-to-noise ratio (above about 35 dB, differences are hard to see).

    Raises:
        ValueError: if the two lists differ in length.
    """
    decoded = [tf.io.decode_jpeg(jpeg, channels=3) for jpeg in encoded_images]
    if len(decoded) != len(images):
        raise ValueError(
            f"`images` and `encoded_images` must be as long. Received: {len(images)} and "
            f"{len(decoded)}"
        )
    return float(
        np.mean(
            [
                tf.image.psnr(image, jpeg, max_val=255).numpy()
                for image, jpeg in zip(images, decoded, strict=True)
            ]
        )
    )
