"""Tests of utils/lessons/accelerator_waiting/step_costs.py: tiny models, a few steps each."""

import keras
import tensorflow as tf

from utils import comparison, timing
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
    line = step_costs.describe_comparison(fed, in_memory, "input-bound")
    assert line == (
        "fed against in memory: 0.71x (medians 750 and 1,050 images/s; ranges 700-800 and "
        "1,000-1,100 over 3 rounds in turns): input-bound."
    )


def test_batch_size_rates_make_one_candidate_per_size():
    example = next(iter(_batches(2)))
    rates = step_costs.batch_size_rates(
        _compiled_model,
        example,
        batches_per_replica=[2, 8],
        num_replicas=2,
        num_timed_steps=2,
    )
    assert list(rates) == ["2 per replica", "8 per replica"]
    runs = comparison.measure_in_turns(rates, repeats=2)
    assert [run.num_runs for run in runs.values()] == [2, 2]


def _conv_and_dense_model():
    inputs = keras.Input((96, 96, 3))
    features = keras.layers.Conv2D(32, 3, padding="same", name="conv")(inputs)
    pooled = keras.layers.GlobalAveragePooling2D()(features)
    return keras.Model(inputs, keras.layers.Dense(200, name="dense")(pooled))


def test_describe_matrix_shapes_counts_a_convolutions_rows_as_batch_height_width():
    model = _conv_and_dense_model()
    assert step_costs.describe_matrix_shapes(model, batch_per_replica=8) == [
        "    conv: rows 8 x 96 x 96 = 73,728 (100% of 73,728); depth 27 (21% of 128) x "
        "width 32 (25% of 128): 5% of the MXU",
        "   dense: rows 8 = 8 (100% of 8); depth 32 (25% of 128) x width 200 (78% of 256): "
        "20% of the MXU",
    ]


def test_describe_matrix_shapes_pads_rows_to_8_and_both_mxu_sides():
    lines = step_costs.describe_matrix_shapes(
        _conv_and_dense_model(), batch_per_replica=3, mxu_size=256
    )
    assert lines[1] == (
        "   dense: rows 3 = 3 (38% of 8); depth 32 (12% of 256) x width 200 (78% of 256): "
        "10% of the MXU"
    )


def test_tiny_model_and_batches_fit_each_other():
    tiny, batches = step_costs.tiny_model_and_batches(
        batch_size=4, num_outputs=5, steps_per_execution=2
    )
    assert tiny.steps_per_execution == 2
    assert tiny.output_shape == (None, 5)
    assert [tuple(part.shape) for part in next(iter(batches))] == [(4, 8), (4, 5)]
    assert timing.time_training_steps(tiny, batches, num_steps=2) > 0
