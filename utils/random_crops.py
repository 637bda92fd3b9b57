"""Random-crop augmentation: a window picked from the JPEG's header, cut and resized.

The window's ranges are those of `tensorflow/tpu`'s ResNet preprocessing
(`models/official/resnet/resnet_preprocessing.py`); `decode_then_crop` decodes the whole
image, then crops, as its training crop does. Lesson 5's `decode_less` decodes less.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import tensorflow as tf

from utils import arguments

# The reference preprocessing's random crop: 8% to 100% of the image's area, aspect
# ratio 3/4 to 4/3, at least 10% of the image, 10 attempts (then the whole image).
AREA_RANGE = (0.08, 1.0)
ASPECT_RATIO_RANGE = (3 / 4, 4 / 3)
MIN_OBJECT_COVERED = 0.1
MAX_ATTEMPTS = 10


def resize(image: tf.Tensor, image_size: int) -> tf.Tensor:
    """Resizes a crop to `image_size` square, bilinear, and rounds it back to uint8.

    No antialiasing, as in the reference preprocessing (bicubic there): it is cheaper,
    and near enough when a crop is at most about twice the output's side (lesson 5: crops
    of 192 px shards, output 96 px).

    Args:
        image: a crop, uint8, (height, width, 3).
        image_size: the output's side, in pixels.

    Returns:
        The resized crop, uint8, (image_size, image_size, 3).

    Raises:
        ValueError: if `image_size` is not a positive integer.
    """
    arguments.check_integer("image_size", image_size, 1)
    image = tf.image.resize(image, [image_size, image_size], antialias=False)
    return tf.saturate_cast(tf.round(image), tf.uint8)


def random_crop_window(image_bytes: tf.Tensor) -> tf.Tensor:
    """Picks a random crop window of a JPEG from its header, without decoding it.

    Args:
        image_bytes: a scalar string tensor, one encoded JPEG.

    Returns:
        An int32 tensor `[offset_y, offset_x, height, width]`, inside the image: 8% to
        100% of its area, aspect ratio 3/4 to 4/3 (the whole image when no such window
        is found in 10 attempts).

    Example:
        window = random_crops.random_crop_window(image_bytes)
    """
    shape = tf.io.extract_jpeg_shape(image_bytes)
    whole_image = tf.constant([0.0, 0.0, 1.0, 1.0], shape=[1, 1, 4])
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        shape,
        bounding_boxes=whole_image,
        min_object_covered=MIN_OBJECT_COVERED,
        aspect_ratio_range=ASPECT_RATIO_RANGE,
        area_range=AREA_RANGE,
        max_attempts=MAX_ATTEMPTS,
        use_image_if_no_bounding_boxes=True,
    )
    return tf.stack([begin[0], begin[1], size[0], size[1]])


def decode_then_crop(
    image_bytes: tf.Tensor, crop_window: tf.Tensor, *, image_size: int
) -> tf.Tensor:
    """Decodes the whole JPEG, then crops the window and resizes it: the usual way.

    Args:
        image_bytes: a scalar string tensor, one encoded JPEG.
        crop_window: `[offset_y, offset_x, height, width]` inside the image.
        image_size: side of the output, in pixels.

    Returns:
        A uint8 tensor `(image_size, image_size, 3)`.

    Raises:
        ValueError: if `image_size` is not a positive integer.

    Example:
        image = random_crops.decode_then_crop(image_bytes, window, image_size=96)
    """
    image = tf.io.decode_jpeg(image_bytes, channels=3)
    offset_y, offset_x, height, width = tf.unstack(crop_window)
    image = tf.image.crop_to_bounding_box(image, offset_y, offset_x, height, width)
    return resize(image, image_size)


def random_crop_batches(
    encoded_images: Sequence[bytes], decode: Callable, *, image_size: int, batch_size: int
) -> tf.data.Dataset:
    """Endless batches of random crops of in-memory JPEGs, each decoded by `decode`.

    Each image gets a new random window (`random_crop_window`) every time it comes round.
    Nothing is read from storage: only decoding, cropping and resizing are left to time.

    Args:
        encoded_images: JPEG bytes, e.g. the `image` feature of records read into memory.
        decode: `decode(image_bytes, window, image_size=...)`, e.g. `decode_then_crop`.
        image_size: side of the output images, in pixels.
        batch_size: images per batch.

    Returns:
        A dataset of uint8 batches `(batch_size, image_size, image_size, 3)`.

    Raises:
        ValueError: if `encoded_images` is empty or a size is not a positive integer.

    Example:
        dataset = random_crops.random_crop_batches(jpegs, random_crops.decode_then_crop,
                                                   image_size=224, batch_size=64)
    """
    arguments.check_integer("image_size", image_size, 1)
    arguments.check_integer("batch_size", batch_size, 1)
    if len(encoded_images) == 0:
        raise ValueError("`encoded_images` must hold at least one JPEG. Received: none.")

    def crop(image_bytes):
        return decode(image_bytes, random_crop_window(image_bytes), image_size=image_size)

    dataset = tf.data.Dataset.from_tensor_slices(list(encoded_images)).repeat()
    dataset = dataset.map(crop, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.batch(batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
