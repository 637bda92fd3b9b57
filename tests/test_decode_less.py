"""Tests of utils/random_crops.py and lesson 5's decode_less.py: three ways to decode a random crop.

Structure, not timings.
"""

import re

import matplotlib
import numpy as np
import pytest
import tensorflow as tf

from utils import display, random_crops
from utils.lessons.accelerator_waiting import decode_less

matplotlib.use("Agg")  # No screen here.


def _jpeg(height, width, *, seed=0):
    """A smooth 4:2:0 JPEG with some noise: photo-like, with every chroma edge case."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    image = np.stack([x * 255 // width, y * 255 // height, (x * y) % 256], axis=-1)
    image = np.clip(image + rng.integers(-20, 20, image.shape), 0, 255).astype(np.uint8)
    return tf.io.encode_jpeg(image, quality=90).numpy()


JPEGS = [_jpeg(192, 192), _jpeg(37, 61, seed=1), _jpeg(200, 131, seed=2)]


LESSON4_IMAGE_SIZE = 96  # Lab 4's IMAGE_SIZE: the model's input, decoded from 192 px.


def test_random_crop_window_stays_inside_the_image_and_keeps_8_percent():
    for jpeg in JPEGS:
        height, width, _ = tf.io.extract_jpeg_shape(jpeg).numpy()
        for _ in range(50):
            top, left, crop_height, crop_width = random_crops.random_crop_window(jpeg).numpy()
            assert 0 <= top and top + crop_height <= height
            assert 0 <= left and left + crop_width <= width
            assert crop_height * crop_width >= 0.08 * height * width - 1


@pytest.mark.parametrize("label", list(decode_less.VARIANTS))
def test_every_variant_gives_lab4_image_size_uint8_for_any_window(label):
    image_size = LESSON4_IMAGE_SIZE
    decode = decode_less.VARIANTS[label]
    for jpeg in JPEGS:
        for window in ([0, 0, 1, 1], random_crops.random_crop_window(jpeg)):
            image = decode(jpeg, tf.constant(window, tf.int32), image_size=image_size)
            assert image.shape == (image_size, image_size, 3)
            assert image.dtype == tf.uint8


def test_variants_show_the_same_part_of_the_image():
    # A smooth gradient: a half-size decode loses no detail there, so any difference
    # beyond rounding is a window in the wrong place (not scaled by the ratio).
    y, x = np.mgrid[0:192, 0:192]
    gradient = np.stack([x * 255 // 192, y * 255 // 192, (x + y) * 255 // 384], axis=-1)
    jpeg = tf.io.encode_jpeg(gradient.astype(np.uint8), quality=90).numpy()
    windows = [tf.constant([40, 60, 100, 80])] + [
        random_crops.random_crop_window(jpeg) for _ in range(20)
    ]
    for window in windows:
        baseline = random_crops.decode_then_crop(jpeg, window, image_size=96).numpy()
        for label, decode in decode_less.VARIANTS.items():
            image = decode(jpeg, window, image_size=96).numpy()
            assert np.abs(image.astype(float) - baseline).mean() < 4, (label, window)


def test_decode_and_crop_equals_decode_then_crop_except_on_the_crop_edges(capsys):
    counts = decode_less.crop_differences(JPEGS, num_windows=20)
    assert counts["num_different_inside"] == 0
    assert counts["num_pixels"] > counts["num_different"] > 0  # Chroma at the edges.
    assert re.fullmatch(
        r"decode_and_crop_jpeg against decode_jpeg then crop, same windows: [\d,]+ of [\d,]+ "
        r"pixels differ \(0 away from the crop's left and right edges\), by at most \d+ of 255\.\n",
        capsys.readouterr().out,
    )


def test_decode_and_crop_is_pixel_exact_without_fancy_upscaling():
    # What TensorFlow's "equivalent to decode and crop" holds to exactly: same pixels,
    # once chroma upsampling does not reach past the crop's edges.
    full = tf.io.decode_jpeg(JPEGS[0], channels=3, fancy_upscaling=False).numpy()
    for _ in range(20):
        window = random_crops.random_crop_window(JPEGS[0])
        top, left, height, width = window.numpy()
        crop = tf.io.decode_and_crop_jpeg(JPEGS[0], window, channels=3, fancy_upscaling=False)
        np.testing.assert_array_equal(crop.numpy(), full[top : top + height, left : left + width])


def test_random_crop_batches_are_static_and_endless():
    dataset = random_crops.random_crop_batches(
        JPEGS, decode_less.decode_only_the_crop, image_size=24, batch_size=4
    )
    assert dataset.element_spec == tf.TensorSpec((4, 24, 24, 3), tf.uint8)
    assert len(list(dataset.take(5))) == 5  # More batches than the 3 JPEGs make.


def test_bad_input_names_the_argument():
    with pytest.raises(
        ValueError, match=r"`image_size` must be a positive integer. Received: image_size=0"
    ):
        random_crops.decode_then_crop(JPEGS[0], [0, 0, 8, 8], image_size=0)
    with pytest.raises(ValueError, match=r"Received: image_size=-1"):
        decode_less.decode_only_the_crop(JPEGS[0], [0, 0, 8, 8], image_size=-1)
    with pytest.raises(
        ValueError, match=r"`ratio` must be one of \(1, 2, 4, 8\). Received: ratio=3"
    ):
        decode_less.decode_scaled_then_crop(JPEGS[0], [0, 0, 8, 8], image_size=8, ratio=3)
    with pytest.raises(ValueError, match=r"`encoded_images` must hold at least one JPEG"):
        random_crops.random_crop_batches(
            [], random_crops.decode_then_crop, image_size=8, batch_size=2
        )
    with pytest.raises(
        ValueError, match=r"`batch_size` must be a positive integer. Received: batch_size=0"
    ):
        random_crops.random_crop_batches(
            JPEGS, random_crops.decode_then_crop, image_size=8, batch_size=0
        )


def test_sample_crops_figure_fits_the_notebook_width(tmp_path):
    rows = decode_less.sample_crops(JPEGS, image_size=32)
    assert list(rows) == ["whole image, window in red", *decode_less.VARIANTS]
    assert [image.shape for image in rows["whole image, window in red"]] == [
        (192, 192, 3),
        (37, 61, 3),
        (200, 131, 3),
    ]
    figure = display.show_image_rows(rows)
    figure.savefig(tmp_path / "crops.png")
    width = matplotlib.image.imread(tmp_path / "crops.png").shape[1]
    assert width <= 1000
    titles = [axis.get_title(loc="left") for axis in figure.axes if axis.get_title(loc="left")]
    assert titles == list(rows)


def test_time_variants_gives_each_variants_images_per_second_baseline_included():
    runs = decode_less.time_variants(JPEGS, image_size=16, num_images=64, repeats=2)
    assert list(runs) == list(decode_less.VARIANTS) and decode_less.BASELINE in runs
    for label, run in runs.items():
        assert run.label == label
        assert run.num_runs == 2 and run.median > 0
