"""Tests of the lab 4 pieces: the model learns, step timing, batch sizes for the replicas.

The lab 4 checks are tested in tests/test_checks_train_keras.py.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from utils import models, pipeline, strategy, timing

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def cpu():
    return strategy.find_strategy("cpu")


def _compiled(cpu, image_size=48, steps_per_execution=1, learning_rate=0.003):
    with cpu.strategy.scope():
        model = models.small_convnet(image_size, 5)
        model.compile(
            optimizer=keras.optimizers.Adam(learning_rate),
            loss="categorical_crossentropy",
            metrics=["accuracy"],
            steps_per_execution=steps_per_execution,
        )
    return model


def test_small_convnet_learns_the_embedded_flowers_well_above_chance(cpu, flowers_400):
    keras.utils.set_random_seed(0)
    train = pipeline.tfrecord_images(  # In order, so that the seed makes the run repeatable.
        flowers_400[:4], target_size=48, num_classes=5, batch_size=32, deterministic=True
    )
    validation = pipeline.tfrecord_images(
        flowers_400[4:], target_size=48, num_classes=5, batch_size=80, deterministic=True
    )
    model = _compiled(cpu)
    model.fit(train.cache().repeat(), steps_per_epoch=10, epochs=20, verbose=0)
    images, labels = next(iter(validation))
    chance = np.bincount(np.argmax(labels, axis=1)).max() / len(labels)
    _, accuracy = model.evaluate(images, labels, verbose=0)
    assert accuracy >= chance + 0.3, (accuracy, chance)


def test_small_convnet_outputs_float32_under_mixed_precision():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        model = models.small_convnet(32, 5)
        assert model.layers[2].compute_dtype == "bfloat16"
        assert model.outputs[0].dtype == "float32"
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_time_training_steps_times_the_second_epoch(cpu):
    model = _compiled(cpu, image_size=16)
    batch = (np.zeros((4, 16, 16, 3), np.uint8), np.eye(4, 5, dtype=np.float32))
    seconds = timing.time_training_steps(
        model, tf.data.Dataset.from_tensors(batch).repeat(), num_steps=3
    )
    assert 0 < seconds < 5
    with pytest.raises(ValueError, match="`num_steps` must be a positive integer"):
        timing.time_training_steps(model, tf.data.Dataset.from_tensors(batch), num_steps=0)


def test_even_batch_size_leaves_the_fewest_images_out():
    assert strategy.even_batch_size(687, max_batch_size=256, num_replicas=8) == 224
    assert strategy.even_batch_size(687, max_batch_size=1024, num_replicas=8) == 680
    assert strategy.even_batch_size(687, max_batch_size=32, num_replicas=1) == 31
    assert strategy.even_batch_size(18, max_batch_size=32, num_replicas=1) == 18
    assert strategy.even_batch_size(45, max_batch_size=64, num_replicas=2) == 44
    with pytest.raises(ValueError, match=r"^5 image\(s\) cannot feed 8 replicas"):
        strategy.even_batch_size(5, max_batch_size=256, num_replicas=8)


def test_cap_batch_size_keeps_a_multiple_of_the_replicas(capsys):
    assert strategy.cap_batch_size(32, num_images=100, num_replicas=1, purpose="training") == 32
    assert capsys.readouterr().out == ""
    capped = strategy.cap_batch_size(1024, num_images=687, num_replicas=8, purpose="validation")
    assert capped == 680
    assert capsys.readouterr().out == (
        "The validation batch of 1024 is larger than the 687 validation images: capped to 680 "
        "(85 per replica).\n"
    )
    assert strategy.cap_batch_size(64, num_images=45, num_replicas=2, purpose="training") == 44
    assert "capped to 44 (22 per replica)" in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"^5 training image\(s\) cannot feed 8 replicas"):
        strategy.cap_batch_size(256, num_images=5, num_replicas=8, purpose="training")
