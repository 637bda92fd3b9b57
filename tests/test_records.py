"""Tests of utils/records.py: one image as a record (transforms, Example, parsing)."""

import numpy as np
import tensorflow as tf

from utils import data, records


def test_resize_and_crop_keeps_proportions_and_takes_the_centre():
    # A 100x200 image: left quarter red, middle half green, right quarter blue.
    image = np.zeros((100, 200, 3), np.uint8)
    image[:, :50, 0] = image[:, 50:150, 1] = image[:, 150:, 2] = 255
    square = records.resize_and_crop(tf.constant(image), 50)
    assert square.dtype == tf.uint8 and square.shape == (50, 50, 3)
    # The centre crop of a 50x100 resize is the green middle half (edges blur a little).
    inside = square.numpy()[:, 2:-2]
    assert inside[:, :, 1].min() == 255 and inside[:, :, [0, 2]].max() == 0
    assert square.numpy()[:, :, 1].mean() > 240


def test_recompress_gives_jpeg_that_decodes_to_the_image():
    image = np.full((32, 32, 3), 120, np.uint8)
    jpeg = records.recompress(tf.constant(image), 90)
    assert jpeg.numpy()[:2] == b"\xff\xd8"
    assert np.abs(tf.io.decode_jpeg(jpeg).numpy().astype(int) - 120).max() <= 2


def test_to_example_round_trips_through_the_schema():
    example = records.to_example(b"jpeg", 2, [300, 400], data.CLASSES)
    record = records.parse_record(tf.constant(example.SerializeToString()))
    assert record["image"].numpy() == b"jpeg"
    assert record["class"].numpy() == 2 and record["label"].numpy() == b"roses"
    assert record["size"].numpy().tolist() == [300, 400]
    assert record["one_hot_class"].numpy().tolist() == [0, 0, 1, 0, 0]
