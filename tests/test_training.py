"""Tests of the lab 4 pieces: the model learns, step timing, and the lab 4 checks."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from utils import checks, models, pipeline, sources, strategy, tfrecords, timing

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def cpu():
    return strategy.find_strategy("cpu")


def _embedded_shards(folder, num_images, target_size):
    source = sources.resolve_source("embedded", num_images=num_images)
    metadata = tfrecords.ensure_shards(source, folder, target_size=target_size, num_shards=5)
    return tfrecords.find_shards(metadata["output_dir"])


@pytest.fixture(scope="module")
def flowers_400(tmp_path_factory):
    return _embedded_shards(tmp_path_factory.mktemp("shards"), 400, target_size=48)


@pytest.fixture(scope="module")
def flowers_1000(tmp_path_factory):
    return _embedded_shards(tmp_path_factory.mktemp("shards"), 1000, target_size=64)


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


# The lab 4 checks.
def test_check_scaling(cpu, capsys):
    rates = dict(base_learning_rate=0.002, max_learning_rate=0.008)

    def run(batch, rate, choice=cpu, batch_per_replica=32):
        checks.check_scaling(
            batch, rate, todo=1, choice=choice, batch_per_replica=batch_per_replica, **rates
        )

    run(32, 0.002)
    assert capsys.readouterr().out == (
        "TODO 1 passed: batch size and learning rate scale with the replicas.\n"
    )
    with pytest.raises(checks.CheckFailed, match=r"^TODO 1 \(global_batch_size\): not done yet"):
        run(..., ...)
    with pytest.raises(checks.CheckFailed, match=r"expected 32 per replica x 1 replica\(s\) = 32"):
        run(128, 0.002)
    eight = strategy.StrategyChoice(FakeEight(), "TPU", ("tpu",))
    run(1024, 0.008, choice=eight, batch_per_replica=128)
    with pytest.raises(
        checks.CheckFailed,
        match=r"expected min\(0.002 x 8, 0.008\) = 0.008; found 0.016. .*never above MAX_",
    ):
        run(1024, 0.016, choice=eight, batch_per_replica=128)


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


class FakeEight:
    num_replicas_in_sync = 8


def test_check_augment(capsys):
    def flips(images, labels):
        return tf.image.random_flip_left_right(tf.image.random_flip_up_down(images)), labels

    checks.check_augment(flips, todo=2, image_size=16)
    assert capsys.readouterr().out.startswith("TODO 2 passed: labels kept")
    with pytest.raises(checks.CheckFailed, match=r"^TODO 2 \(augment\): not done yet"):
        checks.check_augment(lambda images, labels: (..., labels), todo=2, image_size=16)
    with pytest.raises(checks.CheckFailed, match=r"all 48 came back as is"):
        checks.check_augment(lambda images, labels: (images, labels), todo=2, image_size=16)
    with pytest.raises(checks.CheckFailed, match=r"all 48 were changed"):
        checks.check_augment(lambda i, labels: (i[:, ::-1], labels), todo=2, image_size=16)
    with pytest.raises(checks.CheckFailed, match=r"expected the labels unchanged"):
        checks.check_augment(lambda i, labels: (flips(i, labels)[0], labels * 0), todo=2,
                             image_size=16)  # fmt: skip
    with pytest.raises(checks.CheckFailed, match=r"TensorFlow ops"):
        checks.check_augment(lambda i, labels: (np.fliplr(i.numpy()), labels), todo=2,
                             image_size=16)  # fmt: skip


def _train_dataset(flowers_400, *, cache_first=True, drop_remainder=True, prefetch=True):
    dataset = (
        tf.data.TFRecordDataset(flowers_400)
        .map(lambda r: pipeline.parse_batch(r[None], target_size=48, num_classes=5))
        .unbatch()
    )
    if cache_first:
        dataset = dataset.cache().shuffle(100)
    else:
        dataset = dataset.shuffle(100).cache()
    dataset = dataset.repeat().batch(16, drop_remainder=drop_remainder)
    return dataset.prefetch(2) if prefetch else dataset


def test_check_training_dataset(flowers_400, capsys):
    def run(dataset):
        checks.check_training_dataset(dataset, todo=3, batch_size=16, image_size=48, num_classes=5)

    run(_train_dataset(flowers_400))
    assert capsys.readouterr().out.startswith("TODO 3 passed: endless, shuffled batches of 16")
    with pytest.raises(checks.CheckFailed, match=r"^TODO 3 \(make_training_dataset\): not done"):
        run(...)
    with pytest.raises(checks.CheckFailed, match=r"drop_remainder=True"):
        run(_train_dataset(flowers_400, drop_remainder=False))
    with pytest.raises(checks.CheckFailed, match=r"cache\(\) before shuffle\(\)"):
        run(_train_dataset(flowers_400, cache_first=False))
    with pytest.raises(checks.CheckFailed, match=r"prefetch\(\) as the last step"):
        run(_train_dataset(flowers_400, prefetch=False))


def test_check_compiled_model(cpu, capsys):
    def run(model, **settings):
        expected = dict(learning_rate=0.003, steps_per_execution=4, image_size=48)
        checks.check_compiled_model(
            model, todo=4, choice=cpu, num_classes=5, **{**expected, **settings}
        )

    run(_compiled(cpu, steps_per_execution=4))
    assert capsys.readouterr().out == (
        "TODO 4 passed: compiled under the strategy, 4 steps per execution.\n"
    )
    with pytest.raises(checks.CheckFailed, match=r"^TODO 4 \(model\): not done yet"):
        run(...)
    with pytest.raises(checks.CheckFailed, match=r"steps_per_execution=4 in compile\(\); found 1"):
        run(_compiled(cpu))
    with pytest.raises(checks.CheckFailed, match=r"expected learning rate 0.01; found 0.003"):
        run(_compiled(cpu, steps_per_execution=4), learning_rate=0.01)
    with pytest.raises(checks.CheckFailed, match=r"expected the model compiled"):
        run(models.small_convnet(48, 5))
    other = tf.distribute.OneDeviceStrategy("/cpu:0")
    with other.scope():
        elsewhere = models.small_convnet(48, 5)
    with pytest.raises(checks.CheckFailed, match=r"under choice.scope\(\)"):
        run(elsewhere)
