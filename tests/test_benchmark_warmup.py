"""The benchmark's headline runs take a pipeline's start untimed (issue 64): a job pays it once."""

import time

import numpy as np
import tensorflow as tf

from tools.course_benchmark import measure

SLOW_START_SECONDS = 0.3  # Each of the first batches: a pipeline opening its files.


def _slow_start_batches(slow_batches: int, total: int):
    """(images, labels) batches of 64, the first `slow_batches` each after a wait."""
    for index in range(total):
        if index < slow_batches:
            time.sleep(SLOW_START_SECONDS)
        yield np.zeros([64, 2], np.uint8), np.zeros([64], np.int64)


def _dataset(slow_batches: int, total: int) -> tf.data.Dataset:
    signature = (tf.TensorSpec([64, 2], tf.uint8), tf.TensorSpec([64], tf.int64))
    return tf.data.Dataset.from_generator(
        lambda: _slow_start_batches(slow_batches, total), output_signature=signature
    )


def test_the_warmup_batches_are_not_timed_for_a_dataset_or_an_iterable():
    for make in (lambda: _dataset(3, 20), lambda: _slow_start_batches(3, 20)):
        # One batch untimed: two slow ones in the 5 timed (320 images in >= 0.6 s).
        started = measure.rate(make, 320, warmup_batches=1)()
        # Three untimed: the 5 timed come at once.
        steady = measure.rate(make, 320, warmup_batches=3)()
        assert started < 320 / (2 * SLOW_START_SECONDS)
        assert steady > 2 * started
