"""Tests of utils/accelerator_wait.py: tiny models, a few steps each."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from utils import accelerator_wait, comparison, timing


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


def test_describe_float_formats_shows_that_float16_loses_a_small_gradient():
    lines = accelerator_wait.describe_float_formats()
    assert lines == [
        " float32: largest 3.4e+38, smallest normal 1.2e-38, 24 significant bits; "
        "a gradient of 1e-8 becomes 1.0e-08",
        " float16: largest 6.6e+04, smallest normal 6.1e-05, 11 significant bits; "
        "a gradient of 1e-8 becomes 0.0e+00",
        "bfloat16: largest 3.4e+38, smallest normal 1.2e-38, 8 significant bits; "
        "a gradient of 1e-8 becomes 1.0e-08",
    ]


def test_compiled_copy_reuses_the_compile_arguments_but_steps_per_execution():
    model = _compiled_model()
    copy = accelerator_wait.compiled_copy(model, steps_per_execution=1)
    assert copy is not model and copy.optimizer is not model.optimizer
    assert copy.steps_per_execution == 1
    assert copy.loss == "categorical_crossentropy"
    assert float(copy.optimizer.learning_rate) == pytest.approx(0.004)
    for kept, copied in zip(model.get_weights(), copy.get_weights(), strict=True):
        np.testing.assert_array_equal(kept, copied)
    before = [weights.copy() for weights in model.get_weights()]
    copy.fit(_batches(), steps_per_epoch=2, shuffle=False, verbose=0)
    for kept, now in zip(before, model.get_weights(), strict=True):
        np.testing.assert_array_equal(kept, now)  # Training the copy leaves the original.


def test_compiled_copy_of_an_uncompiled_model_says_so():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)], name="bare")
    with pytest.raises(ValueError, match="must be compiled before it is copied. Received: bare"):
        accelerator_wait.compiled_copy(model, steps_per_execution=1)


def test_training_rate_times_steps_and_returns_images_per_second():
    rate = accelerator_wait.training_rate(_compiled_model(), _batches(8), num_steps=4, batch_size=8)
    images_per_second = rate()
    assert isinstance(images_per_second, float) and images_per_second > 0


def test_describe_comparison_gives_both_medians_and_ranges_and_the_verdict():
    fed = comparison.RepeatedResult("fed", (700.0, 800.0, 750.0))
    in_memory = comparison.RepeatedResult("in memory", (1000.0, 1100.0, 1050.0))
    line = accelerator_wait.describe_comparison(fed, in_memory, "input-bound")
    assert line == (
        "fed against in memory: 0.71x (medians 750 and 1,050 images/s; ranges 700-800 and "
        "1,000-1,100 over 3 rounds in turns): input-bound."
    )


def test_median_bars_draw_the_median_and_label_the_range():
    runs = {"from cache": comparison.RepeatedResult("from cache", (900.0, 1000.0, 1200.0))}
    (bar,) = accelerator_wait.median_bars(runs)
    assert bar.label == "from cache\n(900-1,200)"
    assert bar.images_per_second == 1000.0


def test_batch_size_rates_make_one_candidate_per_size():
    example = next(iter(_batches(2)))
    rates = accelerator_wait.batch_size_rates(
        lambda: accelerator_wait.compiled_copy(_compiled_model(), steps_per_execution=1),
        example,
        batches_per_replica=[2, 8],
        num_replicas=2,
        num_timed_steps=2,
    )
    assert list(rates) == ["2 per replica", "8 per replica"]
    runs = comparison.measure_in_turns(rates, repeats=2)
    assert [run.num_runs for run in runs.values()] == [2, 2]


def test_describe_matrix_shapes_counts_a_convolutions_rows_as_batch_height_width():
    inputs = keras.Input((96, 96, 3))
    features = keras.layers.Conv2D(32, 3, padding="same", name="conv")(inputs)
    pooled = keras.layers.GlobalAveragePooling2D()(features)
    model = keras.Model(inputs, keras.layers.Dense(200, name="dense")(pooled))
    assert accelerator_wait.describe_matrix_shapes(model, batch_per_replica=8) == [
        "    conv: rows 8 x 96 x 96 = 73,728, depth 27, width 32: 25% of 128 columns",
        "   dense: rows 8 = 8, depth 32, width 200: 78% of 256 columns",
    ]


def test_tiny_model_and_batches_fit_each_other():
    tiny, batches = accelerator_wait.tiny_model_and_batches(
        batch_size=4, num_outputs=5, steps_per_execution=2
    )
    assert tiny.steps_per_execution == 2
    assert tiny.output_shape == (None, 5)
    assert [tuple(part.shape) for part in next(iter(batches))] == [(4, 8), (4, 5)]
    assert timing.time_training_steps(tiny, batches, num_steps=2) > 0
