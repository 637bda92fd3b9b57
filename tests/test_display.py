"""Tests of utils/display.py."""

import matplotlib
import numpy as np
import pytest
import tensorflow as tf

from utils import display, timing

matplotlib.use("Agg")  # No screen here.
CLASSES = ("a", "b", "c")


def _pairs(count, dtype=np.uint8):
    images = [np.full((10 + i, 20, 3), 100, dtype) for i in range(count)]
    return tf.data.Dataset.from_generator(
        lambda: ((image, i % 3) for i, image in enumerate(images)),
        output_signature=(
            tf.TensorSpec((None, 20, 3), tf.as_dtype(dtype)),
            tf.TensorSpec((), tf.int32),
        ),
    )


def test_show_images_titles_give_class_and_size():
    figure = display.show_images(_pairs(12), class_names=CLASSES)
    titles = [axis.get_title() for axis in figure.axes if axis.get_title()]
    assert titles[:3] == ["a (10x20)", "b (11x20)", "c (12x20)"]
    assert len(titles) == 9


def test_show_images_fewer_images_than_asked():
    figure = display.show_images(_pairs(4), class_names=CLASSES, num_images=9, num_columns=3)
    assert len([axis for axis in figure.axes if axis.get_title()]) == 4


def test_show_images_float_images_in_0_255_are_scaled():
    figure = display.show_images(_pairs(1, np.float32), class_names=CLASSES, num_images=1)
    shown = figure.axes[0].get_images()[0].get_array()
    assert shown.max() <= 1.0


def test_show_images_bad_input():
    with pytest.raises(ValueError, match=r"`num_images` must be a positive integer"):
        display.show_images(_pairs(1), class_names=CLASSES, num_images=0)
    with pytest.raises(ValueError, match=r"yielded no \(image, label\) pairs"):
        display.show_images(_pairs(0), class_names=CLASSES)


def test_plot_throughput_bars_labels_and_log_scale():
    results = [
        timing.ThroughputResult("slow", 10, 1.0, 10.0, None, 0.0),
        timing.ThroughputResult("fast", 10, 0.01, 1000.0, None, 0.0),
    ]
    figure = display.plot_throughput(results, title="T")
    axis = figure.axes[0]
    assert [tick.get_text() for tick in axis.get_xticklabels()] == ["slow", "fast"]
    assert [round(bar.get_height()) for bar in axis.patches] == [10, 1000]
    assert axis.get_yscale() == "log"
    assert display.plot_throughput(results[:1]).axes[0].get_yscale() == "linear"


def test_plot_throughput_needs_results():
    with pytest.raises(ValueError, match=r"`results` must hold at least one"):
        display.plot_throughput([])
