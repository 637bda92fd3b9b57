"""Tests of utils/models.py: the lab's small convnet learns, and keeps float32 outputs."""

import keras
import numpy as np
import pytest

from utils import models, pipeline

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _compiled(image_size=48, steps_per_execution=1, learning_rate=0.003):
    model = models.small_convnet(image_size, 5)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss="categorical_crossentropy",
        metrics=["accuracy"],
        steps_per_execution=steps_per_execution,
    )
    return model


def test_small_convnet_learns_the_embedded_flowers_well_above_chance(flowers_400):
    keras.utils.set_random_seed(0)
    train = pipeline.tfrecord_images(  # In order, so that the seed makes the run repeatable.
        flowers_400[:4], target_size=48, num_classes=5, batch_size=32, deterministic=True
    )
    validation = pipeline.tfrecord_images(
        flowers_400[4:], target_size=48, num_classes=5, batch_size=80, deterministic=True
    )
    model = _compiled()
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
