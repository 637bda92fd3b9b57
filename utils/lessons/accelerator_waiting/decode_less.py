"""Random-crop augmentation that decodes less: only the crop, or at a reduced scale.

The window comes from the JPEG's header alone (`random_crops.random_crop_window`), then
`tf.image.decode_and_crop_jpeg` decodes only it. `tensorflow/tpu`'s ResNet preprocessing
cropped its training images so until its commit 9a3c65a (2023-11-08); since then its
training crop decodes the whole image (`random_crops.decode_then_crop`), and only its
evaluation centre crop uses `decode_and_crop_jpeg`. Each of `VARIANTS` turns the same JPEG
and window into a uint8 image `(image_size, image_size, 3)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tensorflow as tf

from utils import arguments, random_crops

RATIOS = (1, 2, 4, 8)  # The downscaling factors libjpeg decodes at (DCT scaling).


def decode_only_the_crop(
    image_bytes: tf.Tensor, crop_window: tf.Tensor, *, image_size: int
) -> tf.Tensor:
    """Decodes only the window's part of the JPEG (`decode_and_crop_jpeg`), then resizes it.

    The pixels of `random_crops.decode_then_crop` on the same window, without decoding the
    rest.

    Args:
        image_bytes: a scalar string tensor, one encoded JPEG.
        crop_window: `[offset_y, offset_x, height, width]` inside the image.
        image_size: side of the output, in pixels.

    Returns:
        A uint8 tensor `(image_size, image_size, 3)`.

    Raises:
        ValueError: if `image_size` is not a positive integer.

    Example:
        image = decode_less.decode_only_the_crop(image_bytes, window, image_size=96)
    """
    image = tf.io.decode_and_crop_jpeg(image_bytes, crop_window, channels=3)
    return random_crops.resize(image, image_size)


def decode_scaled_then_crop(
    image_bytes: tf.Tensor, crop_window: tf.Tensor, *, image_size: int, ratio: int = 2
) -> tf.Tensor:
    """Decodes the JPEG at 1/`ratio` of its size (DCT scaling), then crops and resizes.

    libjpeg skips the finer frequencies instead of decoding them and scaling down later.
    The window is scaled by the same factor, so the crop shows the same part of the
    image, with `ratio` times fewer pixels on each side.

    Args:
        image_bytes: a scalar string tensor, one encoded JPEG.
        crop_window: `[offset_y, offset_x, height, width]` inside the full-size image.
        image_size: side of the output, in pixels.
        ratio: 1, 2, 4 or 8.

    Returns:
        A uint8 tensor `(image_size, image_size, 3)`.

    Raises:
        ValueError: if `image_size` is not a positive integer, or `ratio` not 1, 2, 4, 8.

    Example:
        image = decode_less.decode_scaled_then_crop(image_bytes, window, image_size=96)
    """
    arguments.check_integer("image_size", image_size, 1)
    if isinstance(ratio, bool) or ratio not in RATIOS:
        raise ValueError(f"`ratio` must be one of {RATIOS}. Received: ratio={ratio!r}")
    image = tf.io.decode_jpeg(image_bytes, channels=3, ratio=ratio)
    offset_y, offset_x, height, width = tf.unstack(crop_window // ratio)
    image = tf.image.crop_to_bounding_box(
        image, offset_y, offset_x, tf.maximum(height, 1), tf.maximum(width, 1)
    )
    return random_crops.resize(image, image_size)


# The three ways, by the name the lesson and the benchmark print.
VARIANTS: dict[str, Callable] = {
    "decode, then crop": random_crops.decode_then_crop,
    "decode only the crop": decode_only_the_crop,
    "decode at 1/2, then crop": decode_scaled_then_crop,
}
BASELINE = "decode, then crop"


def sample_crops(encoded_images: Sequence[bytes], *, image_size: int) -> dict[str, list]:
    """One random window per JPEG, cut by each variant: the rows of a figure.

    Args:
        encoded_images: JPEG bytes (a few).
        image_size: side of the output images, in pixels.

    Returns:
        A dict of lists of uint8 arrays, one per image: "whole image, window in red"
        (decoded whole, the window drawn on it), then each of `VARIANTS` on that window.

    Example:
        figure = display.show_image_rows(decode_less.sample_crops(jpegs[:4], image_size=96))
    """
    arguments.check_integer("image_size", image_size, 1)
    rows = {"whole image, window in red": []} | {label: [] for label in VARIANTS}
    for image_bytes in encoded_images:
        window = random_crops.random_crop_window(image_bytes)
        image = tf.io.decode_jpeg(image_bytes, channels=3)
        height, width = tf.unstack(tf.cast(tf.shape(image)[:2], tf.float32))
        top, left, crop_height, crop_width = tf.unstack(tf.cast(window, tf.float32))
        box = tf.stack(
            [
                top / height,
                left / width,
                (top + crop_height - 1) / height,
                (left + crop_width - 1) / width,
            ]
        )
        framed = tf.image.draw_bounding_boxes(
            tf.cast(image[tf.newaxis], tf.float32),
            box[tf.newaxis, tf.newaxis],
            colors=[[255.0, 0.0, 0.0, 255.0]],
        )
        rows["whole image, window in red"].append(tf.cast(framed[0], tf.uint8).numpy())
        for label, decode in VARIANTS.items():
            rows[label].append(decode(image_bytes, window, image_size=image_size).numpy())
    return rows


def crop_differences(encoded_images: Sequence[bytes], *, num_windows: int = 4) -> dict:
    """Compares `decode_and_crop_jpeg` with decode-then-crop, pixel by pixel, and prints it.

    On `num_windows` random windows per JPEG, before any resizing. libjpeg decodes the
    crop alone, so its chroma upsampling (4:2:0 JPEGs, `fancy_upscaling`) lacks the
    column beside the crop's left and right edges: only those columns may differ.

    Args:
        encoded_images: JPEG bytes.
        num_windows: random windows tried on each JPEG.

    Returns:
        {"num_pixels", "num_different", "num_different_inside", "max_difference"}:
        pixels compared, pixels that differ, those of them off the crop's left and right
        edge columns, and the largest difference in one channel (0-255).

    Example:
        decode_less.crop_differences(jpegs[:100])
    """
    counts = dict(num_pixels=0, num_different=0, num_different_inside=0, max_difference=0)
    for image_bytes in encoded_images:
        image = tf.io.decode_jpeg(image_bytes, channels=3)
        for _ in range(num_windows):
            window = random_crops.random_crop_window(image_bytes)
            top, left, height, width = window.numpy().tolist()
            cropped = tf.io.decode_and_crop_jpeg(image_bytes, window, channels=3)
            expected = image[top : top + height, left : left + width]
            difference = tf.reduce_max(
                tf.abs(tf.cast(cropped, tf.int32) - tf.cast(expected, tf.int32)), axis=-1
            ).numpy()
            counts["num_pixels"] += height * width
            counts["num_different"] += int((difference > 0).sum())
            counts["num_different_inside"] += int((difference[:, 1:-1] > 0).sum())
            counts["max_difference"] = max(counts["max_difference"], int(difference.max()))
    print(
        f"decode_and_crop_jpeg against decode_jpeg then crop, same windows: "
        f"{counts['num_different']:,} of {counts['num_pixels']:,} pixels differ "
        f"({counts['num_different_inside']:,} away from the crop's left and right edges), "
        f"by at most {counts['max_difference']} of 255."
    )
    return counts


def time_variants(
    encoded_images: Sequence[bytes], *, image_size: int, num_images: int, repeats: int
) -> dict:
    """Times each of `VARIANTS` in turns on the same JPEGs; returns each one's images/s.

    Each variant makes endless batches of 64 random crops (`random_crops.random_crop_batches`),
    timed `repeats` times, in turns (`comparison.measure_in_turns`): a change in the
    machine's load touches all of them alike.

    Args:
        encoded_images: JPEG bytes, in memory.
        image_size: side of the output images, in pixels.
        num_images: images timed per run.
        repeats: runs of each variant.

    Returns:
        {variant label: `comparison.RepeatedResult` of its images/s, run by run}, for
        every variant, `BASELINE` among them (compare with `comparison.verdict`).
    """
    from utils import comparison  # Imported here: the decoding functions do not need it.

    crop_datasets = {
        label: random_crops.random_crop_batches(
            encoded_images, decode, image_size=image_size, batch_size=64
        )
        for label, decode in VARIANTS.items()
    }
    return comparison.measure_in_turns(crop_datasets, num_images=num_images, repeats=repeats)
