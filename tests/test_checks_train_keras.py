"""utils/checks/train_keras.py (lab 4): right answers pass, mistakes name the TODO."""

import contextlib
import re
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf

from utils import checks, models, pipeline, strategy

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def cpu():
    return strategy.find_strategy("cpu")


SCALING = dict(batch_per_replica=32, base_learning_rate=0.002, max_learning_rate=0.008)


def _check_scaling(scale_for_replicas):
    checks.check_scaling(scale_for_replicas, todo=1, **SCALING)


def test_check_scaling_passes_the_scaled_and_capped_answer(capsys):
    _check_scaling(lambda n: (32 * n, min(0.002 * n, 0.008)))
    assert capsys.readouterr().out == (
        "TODO 1 passed: batch size and learning rate scale with 1, 2, 8 replicas, capped.\n"
    )


@pytest.mark.parametrize(
    "answer, message",
    [
        (
            lambda n: (..., ...),
            "TODO 1 (scale_for_replicas): not done yet: it returns (Ellipsis, Ellipsis). "
            "Expected (global_batch_size, learning_rate).",
        ),
        (
            lambda n: (32, min(0.002 * n, 0.008)),  # Right on one replica only.
            "TODO 1 (scale_for_replicas): at 2 replica(s), expected a global batch of 32 per "
            "replica x 2 = 64; found 32.",
        ),
        (
            lambda n: (32 * n, 0.002),  # The learning rate not scaled: right on one replica.
            "TODO 1 (scale_for_replicas): at 2 replica(s), expected a learning rate of "
            "min(0.002 x 2, 0.008) = 0.004; found 0.002. Scale it with the replicas, but "
            "never above MAX_LEARNING_RATE.",
        ),
        (
            lambda n: (32 * n, 0.002 * n),  # Not capped: wrong at 8 replicas only.
            "TODO 1 (scale_for_replicas): at 8 replica(s), expected a learning rate of "
            "min(0.002 x 8, 0.008) = 0.008; found 0.016. Scale it with the replicas, but "
            "never above MAX_LEARNING_RATE.",
        ),
    ],
    ids=["not done", "batch not scaled", "rate not scaled", "rate not capped"],
)
def test_check_scaling_catches(answer, message):
    with pytest.raises(checks.CheckFailed) as failure:
        _check_scaling(answer)
    assert str(failure.value) == message


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
        checks.check_augment(
            lambda i, labels: (flips(i, labels)[0], labels * 0), todo=2, image_size=16
        )
    with pytest.raises(checks.CheckFailed, match=r"TensorFlow ops"):
        checks.check_augment(
            lambda i, labels: (np.fliplr(i.numpy()), labels), todo=2, image_size=16
        )


def _make_training_dataset(
    *,
    cache=True,
    cache_first=True,
    repeat_first=False,
    augment=True,
    prefetch=True,
    drop_remainder=True,
    options=False,
    buffer=100,
    shuffle_after_batch=False,
    prefetch_before_augment=False,
    batch=16,
):
    """A learner's `make_training_dataset`, right by default, with one mistake on request."""

    def flips(images, labels):
        return tf.image.random_flip_left_right(tf.image.random_flip_up_down(images)), labels

    def make(paths):
        dataset = (
            tf.data.TFRecordDataset(paths, num_parallel_reads=len(paths))
            .map(lambda r: pipeline.parse_batch(r[None], target_size=48, num_classes=5))
            .unbatch()
        )
        if repeat_first:
            dataset = dataset.repeat()
        if cache and cache_first:
            dataset = dataset.cache()
        if shuffle_after_batch:  # Whole batches shuffled: the same batches every epoch.
            dataset = dataset.batch(batch, drop_remainder=True).shuffle(buffer, seed=1).repeat()
        else:
            dataset = dataset.shuffle(buffer, seed=1)
            if cache and not cache_first:
                dataset = dataset.cache()
            if not repeat_first:
                dataset = dataset.repeat()
            dataset = dataset.batch(batch, drop_remainder=drop_remainder)
        if prefetch_before_augment:
            dataset = dataset.prefetch(tf.data.AUTOTUNE)
        if augment:
            dataset = dataset.map(flips, num_parallel_calls=tf.data.AUTOTUNE)
        if prefetch and not prefetch_before_augment:
            dataset = dataset.prefetch(tf.data.AUTOTUNE)
        if options:
            dataset = dataset.with_options(tf.data.Options())
        return dataset

    return make


def _check_training_dataset(flowers_400, make):
    checks.check_training_dataset(
        make, flowers_400, todo=3, batch_size=16, image_size=48, num_classes=5, num_images=400
    )


@pytest.mark.parametrize("options", [False, True], ids=["prefetch last", "with_options last"])
def test_check_training_dataset_passes(flowers_400, capsys, options):
    _check_training_dataset(flowers_400, _make_training_dataset(options=options))
    assert capsys.readouterr().out == (
        "TODO 3 passed: endless batches of 16 images of (48, 48, 3); later epochs from the "
        "cache, each in a new order, flipped anew.\n"
    )


@pytest.mark.parametrize("mistake", [False, True], ids=["right", "shuffle after batch"])
def test_check_training_dataset_says_when_an_epoch_has_too_few_batches_to_tell(
    flowers_400, capsys, mistake
):
    """A small dataset on 8 devices: the batch capped to the data, 1-3 batches an epoch. With
    so few, a right shuffle repeats most pairs too: the check says it did not judge them."""
    make = _make_training_dataset(batch=128, shuffle_after_batch=mistake)
    checks.check_training_dataset(
        make, flowers_400, todo=3, batch_size=128, image_size=48, num_classes=5, num_images=400
    )
    assert capsys.readouterr().out == (
        "TODO 3 passed: endless batches of 128 images of (48, 48, 3); later epochs from the "
        "cache, each in a new order, flipped anew (new batches in each epoch not checked: an "
        "epoch of 400 images holds 3 batches of 128, and it takes 4 to tell).\n"
    )


@pytest.mark.parametrize(
    "mistake, message",
    [
        (
            dict(repeat_first=True),
            "expected every epoch after the first to come from cache(); it read the shards "
            "again. Put cache() right after read_images(paths), before repeat(): repeat() "
            "before cache() caches an endless stream that never replays.",
        ),
        (
            dict(repeat_first=True, buffer=2048),  # The lab's buffer: 5 epochs read ahead.
            "expected every epoch after the first to come from cache()",
        ),
        (dict(cache=False), "expected every epoch after the first to come from cache()"),
        (
            dict(cache_first=False),
            "expected each epoch in a new order; the second epoch repeats the first one's. "
            "shuffle() after cache(): a cache after the shuffle replays the first epoch's "
            "order.",
        ),
        (
            dict(augment=False),
            "expected the images flipped anew in each epoch; all 400 images seen in both "
            "epochs came back exactly as before. Map augment after batch(), after cache().",
        ),
        (dict(drop_remainder=False), "Batch with drop_remainder=True"),
    ],
    ids=[
        "repeat before cache",
        "repeat before cache, big buffer",
        "no cache",
        "cache after shuffle",
        "no augment",
        "remainder",
    ],
)
def test_check_training_dataset_catches(flowers_400, mistake, message):
    with pytest.raises(checks.CheckFailed) as failure:
        _check_training_dataset(flowers_400, _make_training_dataset(**mistake))
    assert str(failure.value).startswith("TODO 3 (make_training_dataset): ")
    assert message in str(failure.value)


def test_check_training_dataset_shuffle_after_batch_says_batches_repeat(flowers_400):
    with pytest.raises(checks.CheckFailed) as failure:
        _check_training_dataset(flowers_400, _make_training_dataset(shuffle_after_batch=True))
    assert str(failure.value) == (
        "TODO 3 (make_training_dataset): expected new batches in each epoch; 100% of the "
        "pairs of images that shared a batch in the first epoch share one again in the "
        "second. shuffle() before batch(): shuffled after it, the same images stay batched "
        "together in every epoch, in another order. On a TPU as anywhere, the steps then "
        "repeat the same gradients and the model generalizes less from the same number of "
        "steps."
    )


SMALL_BUFFERS = {
    1: "expected each epoch in a new order; the second epoch repeats the first one's. The "
    "shuffle buffer is 1: shuffle(1) keeps the order: each image is drawn from a buffer of "
    "one. Shuffle with a buffer of thousands: shuffle(2048, seed=SEED).",
    2: "expected new batches in each epoch; ...% of the pairs of images that shared a batch "
    "in the first epoch share one again in the second. The shuffle buffer is 2: shuffle(2) "
    "draws each image from the next 2 only (a batch holds 16). Shuffle with a buffer of "
    "thousands: shuffle(2048, seed=SEED). On a TPU as anywhere, the steps then repeat the "
    "same gradients and the model generalizes less from the same number of steps.",
}


@pytest.mark.parametrize("buffer", SMALL_BUFFERS, ids=["buffer of 1", "buffer of 2"])
def test_check_training_dataset_with_a_small_shuffle_buffer_says_so(flowers_400, buffer):
    """The shuffle is where the lab asks (after cache, before batch): the hint names its
    buffer, not the order of the steps."""
    with pytest.raises(checks.CheckFailed) as failure:
        _check_training_dataset(flowers_400, _make_training_dataset(buffer=buffer))
    found = re.sub(r"\d+% of the pairs", "...% of the pairs", str(failure.value))
    assert found == "TODO 3 (make_training_dataset): " + SMALL_BUFFERS[buffer]


@pytest.mark.parametrize(
    "mistake, found",
    [
        (dict(prefetch=False), "none"),
        (dict(prefetch_before_augment=True), "one, but ParallelMapDatasetV2 comes after it"),
    ],
    ids=["no prefetch", "prefetch before augment"],
)
def test_check_training_dataset_without_prefetch_last_says_what_it_costs(
    flowers_400, mistake, found
):
    with pytest.raises(checks.CheckFailed) as failure:
        _check_training_dataset(flowers_400, _make_training_dataset(**mistake))
    assert str(failure.value) == (
        "TODO 3 (make_training_dataset): expected prefetch(tf.data.AUTOTUNE) at the end; "
        f"found {found}. Without it, the accelerator waits at every step while the CPU "
        "batches and augments the next batch: on a TPU each step then takes the input's "
        "time plus the compute's, instead of the longer of the two."
    )


def test_check_training_dataset_not_done_and_shards_kept(flowers_400):
    with pytest.raises(checks.CheckFailed) as failure:
        _check_training_dataset(flowers_400, lambda paths: ...)
    assert str(failure.value).startswith(
        "TODO 3 (make_training_dataset): not done yet: it returns Ellipsis."
    )
    assert all(Path(path).exists() for path in flowers_400)  # Only the copies are deleted.


SCHEDULE = keras.optimizers.schedules.CosineDecay(
    0.0, decay_steps=90, warmup_target=0.003, warmup_steps=10
)


def _build_model(
    *, scope=True, loss="categorical_crossentropy", steps_per_execution=4, learning_rate=0.003
):
    def build(choice):
        with choice.scope() if scope else contextlib.nullcontext():
            model = models.small_convnet(48, 5)
            model.compile(
                optimizer=keras.optimizers.Adam(learning_rate),
                loss=loss,
                metrics=["accuracy"],
                steps_per_execution=steps_per_execution,
            )
        return model

    return build


def _check_compiled_model(cpu, build, **settings):
    expected = dict(learning_rate=0.003, steps_per_execution=4, image_size=48)
    checks.check_compiled_model(
        build, todo=4, choice=cpu, num_classes=5, **{**expected, **settings}
    )


@pytest.mark.parametrize(
    "loss",
    ["categorical_crossentropy", keras.losses.CategoricalCrossentropy()],
    ids=["string", "loss object"],
)
def test_check_compiled_model_passes(cpu, capsys, loss):
    _check_compiled_model(cpu, _build_model(loss=loss))
    assert capsys.readouterr().out == (
        "TODO 4 passed: compiled under the strategy, 4 steps per execution.\n"
    )


def test_check_compiled_model_passes_the_schedule(cpu, capsys):
    _check_compiled_model(cpu, _build_model(learning_rate=SCHEDULE), learning_rate=SCHEDULE)
    assert capsys.readouterr().out.startswith("TODO 4 passed")


def test_check_compiled_model_with_the_peak_rate_for_the_schedule_says_so(cpu):
    with pytest.raises(checks.CheckFailed) as failure:
        _check_compiled_model(cpu, _build_model(), learning_rate=SCHEDULE)
    assert str(failure.value) == (
        "TODO 4 (build_model): expected the learning-rate schedule CosineDecay({'initial_"
        "learning_rate': 0.0, 'decay_steps': 90, 'alpha': 0.0, 'name': 'CosineDecay', "
        "'warmup_target': 0.003, 'warmup_steps': 10}); found a constant 0.003. Give the "
        "optimizer the schedule object, keras.optimizers.Adam(learning_rate_schedule), not a "
        "number."
    )


@pytest.mark.parametrize(
    "build, settings, message",
    [
        (lambda choice: ..., {}, "not done yet: it returns Ellipsis. Expected a compiled"),
        (_build_model(steps_per_execution=1), {}, "steps_per_execution=4 in compile(); found 1"),
        (
            _build_model(),
            dict(learning_rate=0.01),
            "expected learning rate 0.01; found a constant 0.003.",
        ),
        (
            _build_model(loss="mse"),
            {},
            "expected the categorical cross-entropy of the softmax outputs (-log 0.5 = 0.693 "
            "where the right class has probability 0.5); found 0.0",
        ),
        (
            _build_model(loss=keras.losses.CategoricalCrossentropy(from_logits=True)),
            {},
            "expected the categorical cross-entropy of the softmax outputs",
        ),
        (
            _build_model(scope=False),  # Passes on the default strategy of one CPU.
            {},
            "expected every variable made under choice.scope(); called with another strategy, "
            "17 of its 17 weights were made outside its scope. Build and compile the model "
            "inside `with choice.scope():`.",
        ),
    ],
    ids=["not done", "steps_per_execution", "learning rate", "mse", "from logits", "scope"],
)
def test_check_compiled_model_catches(cpu, build, settings, message):
    with pytest.raises(checks.CheckFailed) as failure:
        _check_compiled_model(cpu, build, **settings)
    assert str(failure.value).startswith("TODO 4 (build_model): ")
    assert message in str(failure.value)


@pytest.mark.parametrize("cache", [True, False], ids=["cached", "not cached"])
def test_check_training_dataset_fails_a_function_that_ignores_its_paths(flowers_400, cache):
    """The lab's `train_paths` read instead of `paths`: the copies' deletion cannot show it
    (the shards it reads are still there), with or without the cache."""
    right = _make_training_dataset(cache=cache)
    with pytest.raises(checks.CheckFailed) as failure:
        _check_training_dataset(flowers_400, lambda paths: right(flowers_400))
    assert str(failure.value) == (
        "TODO 3 (make_training_dataset): expected it to read the shards in `paths`, its "
        "argument; given paths of shards that do not exist, it still gave a batch: it reads "
        "other files. Start from read_images(paths)."
    )
