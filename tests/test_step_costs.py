"""Tests of utils/lessons/accelerator_waiting/step_costs.py: a tiny model, a few steps."""

import keras
import tensorflow as tf

from utils import comparison
from utils.lessons.accelerator_waiting import step_costs


def _compiled_model():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
    model.compile(
        optimizer=keras.optimizers.Adam(0.004),
        loss="categorical_crossentropy",
        metrics=["accuracy"],
        steps_per_execution=4,
    )
    return model


def _batches(size=8):
    return tf.data.Dataset.from_tensors(
        (tf.ones([size, 4]), tf.one_hot(tf.zeros([size], tf.int32), 3))
    ).repeat()


def test_training_rate_times_steps_and_returns_images_per_second():
    rate = step_costs.training_rate(_compiled_model(), _batches(8), num_steps=4, batch_size=8)
    images_per_second = rate()
    assert isinstance(images_per_second, float) and images_per_second > 0


def test_describe_comparison_gives_both_medians_and_ranges_and_the_verdict():
    fed = comparison.RepeatedResult("fed", (700.0, 800.0, 750.0))
    in_memory = comparison.RepeatedResult("in memory", (1000.0, 1100.0, 1050.0))
    said = comparison.verdict(fed, in_memory, slower="input-bound")
    line = step_costs.describe_comparison(fed, in_memory, said)
    assert line == (
        "fed against in memory: 0.71x (medians 750 and 1,050 images/s; ranges 700-800 and "
        "1,000-1,100 over 3 rounds in turns): beyond the noise: input-bound."
    )
