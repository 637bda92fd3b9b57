"""Tests of utils/step_timing.py: tiny models, a few steps each."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from utils import step_timing, timing


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
    lines = step_timing.describe_float_formats()
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
    copy = step_timing.compiled_copy(model, steps_per_execution=1)
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
        step_timing.compiled_copy(model, steps_per_execution=1)


def test_input_bound_summary_and_verdict():
    bound = step_timing.InputBound(0.030, 0.020, 1.5, "input-bound")
    assert bound.summary() == (
        "Step time: 30.0 ms fed by the pipeline without cache, 20.0 ms with one batch in "
        "memory: ratio 1.50\nTraining here is input-bound: reading and decoding cost 50% "
        "of a step."
    )


def test_measure_input_bound_times_both_feeds():
    bound = step_timing.measure_input_bound(_compiled_model(), _batches(), _batches(), num_steps=4)
    assert bound.step_fed > 0 and bound.step_in_memory > 0
    assert bound.ratio == pytest.approx(bound.step_fed / bound.step_in_memory)
    expected = "not input-bound" if bound.ratio <= 1.1 else "input-bound"
    assert bound.verdict == expected


def test_describe_keeps_up_compares_each_pipeline_with_each_consumer():
    result = timing.ThroughputResult("cached", 100, 0.1, 1000.0, None, 0.0)
    lines = step_timing.describe_keeps_up([result], {"cpu consumes": 500, "tpu consumes": 4000})
    assert lines == [
        "cached: 1,000 images/s; cpu consumes 500: 2.00x, keeps up",
        "cached: 1,000 images/s; tpu consumes 4,000: 0.25x, input-bound",
    ]


def test_time_batch_sizes_prints_one_line_per_size(capsys):
    example = next(iter(_batches(2)))
    seconds = step_timing.time_batch_sizes(
        lambda: step_timing.compiled_copy(_compiled_model(), steps_per_execution=1),
        example,
        batches_per_replica=[2, 8],
        num_replicas=1,
        num_timed_steps=2,
    )
    assert sorted(seconds) == [2, 8]
    lines = capsys.readouterr().out.splitlines()
    assert [line[:24] for line in lines] == ["   2 images per replica:", "   8 images per replica:"]


def test_tiny_model_and_batches_fit_each_other():
    tiny, batches = step_timing.tiny_model_and_batches(
        batch_size=4, num_outputs=5, steps_per_execution=2
    )
    assert tiny.steps_per_execution == 2
    assert tiny.output_shape == (None, 5)
    assert [tuple(part.shape) for part in next(iter(batches))] == [(4, 8), (4, 5)]
    assert timing.time_training_steps(tiny, batches, num_steps=2) > 0


def test_describe_steps_per_execution_gives_each_model_its_ratio():
    step_times = {1: {"tiny model": 0.004}, 16: {"tiny model": 0.001}}
    assert step_timing.describe_steps_per_execution(step_times, 16) == [
        "  tiny model:    4.00 ms per step one at a time,    1.00 ms with "
        "steps_per_execution=16: 4.00x"
    ]
