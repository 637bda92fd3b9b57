"""Tests of utils/timing.py."""

import time

import numpy as np
import pytest
import tensorflow as tf

from utils import storage, timing


def _slow_first_element(seconds):
    def maybe_sleep(index):
        if index == 0:
            time.sleep(seconds)
        return np.zeros((4, 4, 3), np.uint8)

    return tf.data.Dataset.range(50).map(
        lambda i: tf.numpy_function(maybe_sleep, [i], tf.uint8, stateful=True)
    )


def test_measure_throughput_excludes_warmup(capsys):
    result = timing.measure_throughput(_slow_first_element(0.5), num_images=20, label="x")
    assert result.warmup_seconds >= 0.5
    assert result.seconds < 0.5
    assert result.num_images == 20
    assert result.images_per_second == pytest.approx(20 / result.seconds)
    assert result.megabytes_per_second is None
    assert capsys.readouterr().out.startswith("x: Throughput: ")


def test_measure_throughput_counts_images_in_batches():
    images = tf.data.Dataset.from_tensors(tf.zeros((8, 8, 3), tf.uint8)).repeat(100)
    result = timing.measure_throughput(images.batch(10), num_images=35)
    assert result.num_images == 40  # Four whole batches of 10 reach 35.


def test_measure_throughput_counts_encoded_image_batches():
    strings = tf.data.Dataset.from_tensors(tf.constant("jpeg")).repeat(30).batch(5)
    assert timing.measure_throughput(strings, num_images=10).num_images == 10


def test_measure_throughput_stops_when_the_dataset_ends():
    images = tf.data.Dataset.from_tensors(tf.zeros((8, 8, 3))).repeat(6)
    result = timing.measure_throughput(images, num_images=100)
    assert result.num_images == 5  # One went to the warm-up.


def test_measure_throughput_reports_megabytes_from_storage(small_flowers):
    simulated = storage.SimulatedStorage(latency_ms=0)
    paths = sorted(str(p) for p in small_flowers.glob("*/*.jpg"))
    options = tf.data.Options()
    options.experimental_optimization.inject_prefetch = False  # Read nothing ahead.
    dataset = tf.data.Dataset.from_tensor_slices(paths).map(simulated.read_file)
    result = timing.measure_throughput(
        dataset.with_options(options), num_images=20, storage=simulated
    )
    expected = (simulated.num_bytes_read - len(open(paths[0], "rb").read())) / 1e6
    assert result.megabytes_per_second == pytest.approx(expected / result.seconds)


def test_summary_line_format():
    result = timing.ThroughputResult("seq", 20, 2.0, 10.0, 0.5, 1.25)
    expected = "seq: Throughput: 10.0 images/s, 0.5 MB/s (20 images; warm-up 1.2 s excluded)"
    assert result.summary() == expected


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_images": 0}, r"`num_images` must be a positive integer"),
        ({"num_images": 5, "num_warmup_elements": -1}, r"`num_warmup_elements` must be"),
        ({"num_images": 5, "num_warmup_elements": 10}, r"ended after 3 elements, during the"),
    ],
    ids=["no images", "negative warm-up", "dataset shorter than warm-up"],
)
def test_measure_throughput_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        timing.measure_throughput(tf.data.Dataset.range(3), **kwargs)


def test_measure_throughput_not_a_dataset():
    with pytest.raises(ValueError, match=r"`dataset` must be a tf.data.Dataset"):
        timing.measure_throughput([1, 2, 3], num_images=2)


def test_measure_throughput_nothing_after_warmup():
    with pytest.raises(ValueError, match=r"ended right after the warm-up"):
        timing.measure_throughput(tf.data.Dataset.range(1), num_images=2)


def test_compare_throughput_ratios_and_table(capsys):
    slow = timing.ThroughputResult("slow", 10, 1.0, 10.0, None, 0.0)
    fast = timing.ThroughputResult("fast", 10, 0.1, 100.0, 5.0, 0.0)
    assert timing.compare_throughput([slow, fast], baseline="slow") == {"slow": 1.0, "fast": 10.0}
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["pipeline", "images/s", "MB/s", "vs", "slow"]
    assert table[2].split() == ["fast", "100.0", "5.0", "10.0x"]


def test_compare_throughput_unknown_baseline():
    slow = timing.ThroughputResult("slow", 10, 1.0, 10.0, None, 0.0)
    with pytest.raises(ValueError, match=r"`baseline` must be one of \['slow'\]"):
        timing.compare_throughput([slow], baseline="fast")
