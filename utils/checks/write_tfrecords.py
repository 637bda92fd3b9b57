"""Checks for lab 2: resize and crop, recompress, build the record, write a shard safely.

The record's and the shard's checks (TODOs 3 and 4) are in `write_tfrecords_shard`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from utils import records
from utils.checks._base import CHECK_ERRORS, call_eagerly, fail, first_line, passed
from utils.checks.write_tfrecords_shard import check_to_example, check_write_shard
from utils.lab import arguments

__all__ = ["check_recompress", "check_resize_and_crop", "check_to_example", "check_write_shard"]

# Mean absolute difference (0-255 scale) from the reference resize-and-crop, over the
# sample: other resize methods stay under 5; squashing to a square or cropping without
# resizing gives 14 and 25 on the embedded flowers.
_MAX_RESIZE_DIFFERENCE = 6.0


def check_resize_and_crop(
    resize_and_crop: Callable, *, todo: int, sample_images: Sequence[np.ndarray], target_size: int
) -> None:
    """Checks `resize_and_crop(image, target_size)`: an aspect-preserving resize, centre crop.

    It runs the function inside `Dataset.map` (as the conversion does) and compares its
    images with the reference `records.resize_and_crop`.

    Args:
        resize_and_crop: the learner's function, run eagerly once, then in `Dataset.map`.
        todo: the TODO's number, named in every message.
        sample_images: uint8 images (height, width, 3); a tall and a wide copy of the
            first are added.
        target_size: the side of the square output, in pixels.

    Raises:
        ValueError: when `target_size` is not a positive integer (the lab's parameter).
        CheckFailed: naming the TODO, when an output is not uint8 of the target shape or
            differs from the reference by more than other resize methods do.

    Example:
        checks.check_resize_and_crop(resize_and_crop, todo=1, sample_images=images,
                                     target_size=192)
    """
    __tracebackhide__ = True
    arguments.check_integer("TARGET_SIZE", target_size, 1)  # A parameter, not TODO 1.
    name = "resize_and_crop"
    expected = f"a uint8 image of shape ({target_size}, {target_size}, 3)"
    call_eagerly(
        resize_and_crop,
        (tf.constant(sample_images[0]), target_size),
        todo=todo,
        name=name,
        expected=expected,
    )
    # The sample may be all landscape: a tall and a wide copy show a scale taken from one
    # side (the height, say) instead of the shorter one.
    first, num_sample = np.asarray(sample_images[0]), len(sample_images)
    sample_images = [*sample_images, first.transpose(1, 0, 2), first[: max(1, len(first) // 2)]]
    images = tf.data.Dataset.from_generator(
        lambda: iter(sample_images), output_signature=tf.TensorSpec((None, None, 3), tf.uint8)
    )
    try:
        found = list(images.map(lambda image: resize_and_crop(image, target_size)))
    except CHECK_ERRORS as error:
        fail(
            todo,
            name,
            f"expected {expected}, computed with TensorFlow ops (it runs inside Dataset.map); "
            f"found an error: {first_line(error)}",
        )
    differences = []
    for original, image in zip(sample_images, found, strict=True):
        if image.dtype != tf.uint8 or tuple(image.shape) != (target_size, target_size, 3):
            fail(
                todo,
                name,
                f"expected {expected}; found {image.dtype.name} of shape {tuple(image.shape)} "
                f"for an image of shape {original.shape}. Cast back to uint8 after resizing.",
            )
        reference = records.resize_and_crop(tf.constant(original), target_size)
        differences.append(np.abs(image.numpy().astype(float) - reference.numpy()).mean())
    if np.mean(differences) > _MAX_RESIZE_DIFFERENCE:
        fail(
            todo,
            name,
            f"expected the centre of the image, resized with its proportions kept; the "
            f"images differ from that by {np.mean(differences):.1f} levels on average "
            f"(at most {_MAX_RESIZE_DIFFERENCE:g} expected). Cut the centre square, its side "
            "the SHORTER of height and width, then resize it to target_size.",
        )
    _require_antialiased(resize_and_crop, todo, name, target_size)
    passed(todo, f"{num_sample} images resized and cropped to {expected[2:]}.")


def _require_antialiased(resize_and_crop: Callable, todo: int, name: str, target_size: int):
    """Fails when a square of fine detail, shrunk 4x, matches a resize without antialiasing.

    The square needs no crop, so both references are one `tf.image.resize` whatever order
    the learner crops and resizes in. Noise is the detail a plain resize aliases most: it
    samples 1 pixel in 4 (a noisy result), an antialiased one averages them (a smooth one).
    """
    __tracebackhide__ = True
    side = 4 * target_size
    noise = np.random.default_rng(0).integers(0, 256, (side, side, 3), dtype=np.uint8)
    found = tf.cast(resize_and_crop(tf.constant(noise), target_size), tf.float32)

    def distance(antialias: bool) -> float:
        reference = tf.image.resize(noise, (target_size, target_size), antialias=antialias)
        return float(tf.reduce_mean(tf.abs(found - reference)))

    if distance(antialias=False) < distance(antialias=True):
        fail(
            todo,
            name,
            f"expected a resize with antialias=True; found one without. Shrinking a "
            f"{side}-px image to {target_size} px then reads 1 pixel in 4 and turns fine "
            "detail into noise (aliasing): the model trains on artefacts that the photos do "
            "not have. Pass antialias=True to tf.image.resize.",
        )


def check_recompress(
    recompress: Callable, *, todo: int, sample_images: Sequence[np.ndarray], quality: int
) -> None:
    """Checks `recompress(image, quality)`: JPEG bytes that decode back to the same image.

    Args:
        recompress: the learner's function, called eagerly on each sample image.
        todo: the TODO's number, named in every message.
        sample_images: uint8 images (height, width, 3).
        quality: the JPEG quality asked for, 0 to 100.

    Raises:
        ValueError: when `quality` is not an integer from 0 to 100 (the lab's parameter).
        CheckFailed: naming the TODO, when the result is not a string tensor, does not
            decode to the same image, or its size is not that of JPEG at `quality`.

    Example:
        checks.check_recompress(recompress, todo=2, sample_images=resized, quality=90)
    """
    __tracebackhide__ = True
    arguments.check_integer("JPEG_QUALITY", quality, 0, 100)  # A parameter, not TODO 2.
    name = "recompress"
    expected = "a scalar string tensor of JPEG bytes"
    num_bytes, reference_bytes = 0, 0
    for image in sample_images:
        encoded = call_eagerly(
            recompress, (tf.constant(image), quality), todo=todo, name=name, expected=expected
        )
        if not isinstance(encoded, tf.Tensor) or encoded.dtype != tf.string or encoded.shape.rank:
            fail(todo, name, f"expected {expected}; found {encoded!r:.80}.")
        try:
            decoded = tf.io.decode_jpeg(encoded, channels=3).numpy()
        except tf.errors.InvalidArgumentError as error:
            fail(todo, name, f"expected JPEG bytes; they do not decode: {first_line(error)}")
        if decoded.shape != image.shape or np.abs(decoded.astype(float) - image).mean() > 20:
            fail(todo, name, "expected JPEG bytes of the same image; they decode to another.")
        num_bytes += len(encoded.numpy())
        reference_bytes += len(records.recompress(tf.constant(image), quality).numpy())
    _require_optimized(recompress, todo, name, sample_images, quality)
    ratio = num_bytes / reference_bytes
    if not 0.8 <= ratio <= 1.25:
        fail(
            todo,
            name,
            f"expected JPEG at quality {quality}; the bytes are {ratio:.2f}x the size of that. "
            "Pass quality=quality to tf.io.encode_jpeg.",
        )
    average = num_bytes / len(sample_images)
    passed(todo, f"{len(sample_images)} images recompressed to JPEG at quality {quality}.")
    print(f"Average: {average:,.0f} bytes per image.")


def _require_optimized(
    recompress: Callable, todo: int, name: str, sample_images: Sequence[np.ndarray], quality: int
) -> None:
    """Fails when every image's bytes are those of `encode_jpeg` without `optimize_size`."""
    __tracebackhide__ = True
    found, plain, optimized = 0, 0, 0
    for image in sample_images:
        learners = recompress(tf.constant(image), quality).numpy()
        unoptimized = tf.io.encode_jpeg(image, quality=quality).numpy()
        if learners != unoptimized:
            return
        found += len(learners)
        plain += len(unoptimized)
        optimized += len(tf.io.encode_jpeg(image, quality=quality, optimize_size=True).numpy())
    if plain > optimized:
        fail(
            todo,
            name,
            f"expected optimize_size=True; without it the same pixels take "
            f"{plain / optimized - 1:.0%} more bytes ({found / len(sample_images):,.0f} "
            f"instead of {optimized / len(sample_images):,.0f} per image), which storage "
            "sends again on every epoch. Pass optimize_size=True to tf.io.encode_jpeg.",
        )
