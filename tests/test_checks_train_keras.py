"""utils/checks/train_keras.py (lab 4): right answers pass, mistakes name the TODO."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf

from tests.conftest import REPO_ROOT
from utils import checks, pipeline

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


ONE_CPU = "the names of the 1 device(s) Keras trains on here, ['cpu:0']"


@pytest.mark.parametrize(
    "devices",
    [["cpu:0"], ("/device:CPU:0",), tf.config.list_logical_devices("CPU")],
    ids=["keras names", "tensorflow names", "logical devices"],
)
def test_check_distribution_passes_every_device_however_named(devices, capsys):
    checks.check_distribution(devices, todo=1)
    assert capsys.readouterr().out == (
        "TODO 1 passed: all 1 CPU device(s) Keras trains on here, one replica each.\n"
    )


@pytest.mark.parametrize(
    "devices, message",
    [
        (..., f"not done yet: devices is still ... (Ellipsis). Expected {ONE_CPU}."),
        (1, f"expected a list: {ONE_CPU}; found 1 (int)."),
        ("cpu:0", f"expected a list: {ONE_CPU}; found 'cpu:0' (str)."),
        (
            ["gpu:0"],
            "expected the devices Keras trains on here, ['cpu:0']; found ['gpu:0']. "
            "keras.distribution.list_devices() names them (a TPU's or the GPUs, else the "
            "CPU's).",
        ),
    ],
    ids=["not done", "a count", "one name", "another kind"],
)
def test_check_distribution_catches(devices, message):
    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_distribution(devices, todo=1)
    assert str(failure.value) == "TODO 1 (devices): " + message


# On 8 JAX devices (simulated): a learner's answers, each after the distribution is unset (it
# is global), in one process, and what the check says.
JAX_ANSWERS = {
    "right": "devices = keras.distribution.list_devices()\n"
    "keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))",
    "jax devices": "devices = jax.devices()\n"
    "keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))",
    "one device": "devices = jax.devices()[:1]\n"
    "keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))",
    "not set": "devices = jax.devices()\n"
    "distribution = keras.distribution.DataParallel(devices=devices)",
    "set over one": "devices = jax.devices()\n"
    "keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices[:1]))",
}
JAX_SCRIPT = """
import contextlib, io, json, sys
import jax, keras
from utils import checks
for answer in json.loads(sys.argv[1]):
    keras.distribution.set_distribution(None)
    namespace = {"jax": jax, "keras": keras}
    exec(answer, namespace)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            checks.check_distribution(namespace["devices"], todo=1)
    except checks.CheckFailed as failure:
        print(json.dumps(str(failure)))
    else:
        print(json.dumps(printed.getvalue().strip()))
"""


def test_check_distribution_on_8_jax_devices_reads_the_distribution_set():
    pytest.importorskip("jax", reason="the JAX backend needs jax (requirements-dev.txt)")
    env = {
        **os.environ,
        "KERAS_BACKEND": "jax",
        "XLA_FLAGS": "--xla_force_host_platform_device_count=8",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    run = subprocess.run(
        [sys.executable, "-c", JAX_SCRIPT, json.dumps(list(JAX_ANSWERS.values()))],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    said = [json.loads(line) for line in run.stdout.splitlines()[-len(JAX_ANSWERS) :]]
    found = dict(zip(JAX_ANSWERS, said, strict=True))  # The check's line, or its failure.
    eight = [f"cpu:{n}" for n in range(8)]
    passed = (
        "TODO 1 passed: all 8 CPU device(s) Keras trains on here, one replica each; "
        "keras.distribution.distribution() is a DataParallel over them."
    )
    assert found == {
        "right": passed,
        "jax devices": passed,
        "one device": f"TODO 1 (devices): expected all 8 devices Keras trains on here, {eight}; "
        "found 1, ['cpu:0']. The other 7 would sit idle: keras.distribution.list_devices() "
        "names them all.",
        "not set": "TODO 1 (devices): expected fit() to train on every device; Keras has no "
        "distribution set. Make keras.distribution.DataParallel(devices=devices) and pass it "
        "to keras.distribution.set_distribution().",
        "set over one": f"TODO 1 (devices): expected the distribution set over `devices`, "
        f"{eight}; it is over ['cpu:0']. Make it with DataParallel(devices=devices).",
    }


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
            dataset = dataset.shuffle(buffer, seed=1) if buffer else dataset  # 0: no shuffle.
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
    checks.check_training_dataset(make, flowers_400, todo=2, batch_size=16, image_size=48)


@pytest.mark.parametrize("options", [False, True], ids=["prefetch last", "with_options last"])
def test_check_training_dataset_passes(flowers_400, capsys, options):
    _check_training_dataset(flowers_400, _make_training_dataset(options=options))
    assert capsys.readouterr().out == (
        "TODO 2 passed: endless batches of 16 images of (48, 48, 3); later epochs from the "
        "cache, each in a new order, flipped anew.\n"
    )


@pytest.mark.parametrize("mistake", [False, True], ids=["right", "shuffle after batch"])
def test_check_training_dataset_says_when_an_epoch_has_too_few_batches_to_tell(
    flowers_400, capsys, mistake
):
    """A small dataset on 8 devices: the batch capped to the data, 1-3 batches an epoch. With
    so few, a right shuffle repeats most pairs too: the check says it did not judge them."""
    make = _make_training_dataset(batch=128, shuffle_after_batch=mistake)
    checks.check_training_dataset(make, flowers_400, todo=2, batch_size=128, image_size=48)
    assert capsys.readouterr().out == (
        "TODO 2 passed: endless batches of 128 images of (48, 48, 3); later epochs from the "
        "cache, each in a new order, flipped anew (new batches in each epoch not checked: an "
        "epoch of 400 images holds 3 batches of 128, and it takes 4 to tell).\n"
    )


@pytest.mark.parametrize(
    "mistake, message",
    [
        (
            dict(repeat_first=True),
            "expected every epoch after the first to come from cache(); it read the shards "
            "again. Put cache() right after map(read_tfrecord), before repeat(): repeat() "
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
            dict(buffer=0),  # No shuffle at all: not told about "a cache after the shuffle".
            "expected each epoch in a new order; the second epoch repeats the first one's. "
            "There is no shuffle(): add shuffle(2048, seed=SEED) after cache().",
        ),
        (
            dict(augment=False),
            "expected the images flipped anew in each epoch; all 400 images seen in both "
            "epochs came back exactly as before. Map augment after batch(), after cache().",
        ),
        (
            dict(drop_remainder=False),
            "expected batches of exactly 16 images, a static size; found images of shape "
            "(None, 48, 48, 3) and labels (None, 5). Batch with batch(global_batch_size, "
            "drop_remainder=True) so that every batch has the same, known size.",
        ),
    ],
    ids=[
        "repeat before cache",
        "repeat before cache, big buffer",
        "no cache",
        "cache after shuffle",
        "no shuffle",
        "no augment",
        "remainder",
    ],
)
def test_check_training_dataset_catches(flowers_400, mistake, message):
    with pytest.raises(checks.CheckFailed) as failure:
        _check_training_dataset(flowers_400, _make_training_dataset(**mistake))
    assert str(failure.value).startswith("TODO 2 (make_training_dataset): ")
    assert message in str(failure.value)


def test_check_training_dataset_shuffle_after_batch_says_batches_repeat(flowers_400):
    with pytest.raises(checks.CheckFailed) as failure:
        _check_training_dataset(flowers_400, _make_training_dataset(shuffle_after_batch=True))
    assert str(failure.value) == (
        "TODO 2 (make_training_dataset): expected new batches in each epoch; 100% of the "
        "pairs of images that shared a batch in the first epoch share one again in the "
        "second. shuffle() before batch(): shuffled after it, the same images stay batched "
        "together in every epoch, in another order."
    )


SMALL_BUFFERS = {
    1: "expected each epoch in a new order; the second epoch repeats the first one's. The "
    "shuffle buffer is 1: shuffle(1) keeps the order: each image is drawn from a buffer of "
    "one. Shuffle with a buffer of thousands: shuffle(2048, seed=SEED).",
    2: "expected new batches in each epoch; ...% of the pairs of images that shared a batch "
    "in the first epoch share one again in the second. The shuffle buffer is 2: shuffle(2) "
    "draws each image from the next 2 only (a batch holds 16). Shuffle with a buffer of "
    "thousands: shuffle(2048, seed=SEED).",
}


@pytest.mark.parametrize("buffer", SMALL_BUFFERS, ids=["buffer of 1", "buffer of 2"])
def test_check_training_dataset_with_a_small_shuffle_buffer_says_so(flowers_400, buffer):
    """The shuffle is where the lab asks (after cache, before batch): the hint names its
    buffer, not the order of the steps."""
    with pytest.raises(checks.CheckFailed) as failure:
        _check_training_dataset(flowers_400, _make_training_dataset(buffer=buffer))
    found = re.sub(r"\d+% of the pairs", "...% of the pairs", str(failure.value))
    assert found == "TODO 2 (make_training_dataset): " + SMALL_BUFFERS[buffer]


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
        "TODO 2 (make_training_dataset): expected prefetch(tf.data.AUTOTUNE) at the end; "
        f"found {found}. Without it, the accelerator waits at every step while the CPU "
        "batches and augments the next batch: on a TPU each step then takes the input's "
        "time plus the compute's, instead of the longer of the two."
    )


def test_check_training_dataset_not_done_and_shards_kept(flowers_400):
    with pytest.raises(checks.CheckFailed) as failure:
        _check_training_dataset(flowers_400, lambda paths: ...)
    assert str(failure.value).startswith(
        "TODO 2 (make_training_dataset): not done yet: it returns Ellipsis."
    )
    assert all(Path(path).exists() for path in flowers_400)  # Only the copies are deleted.


@pytest.mark.parametrize("cache", [True, False], ids=["cached", "not cached"])
def test_check_training_dataset_fails_a_function_that_ignores_its_paths(flowers_400, cache):
    """The lab's `train_paths` read instead of `paths`: the copies' deletion cannot show it
    (the shards it reads are still there), with or without the cache."""
    right = _make_training_dataset(cache=cache)
    with pytest.raises(checks.CheckFailed) as failure:
        _check_training_dataset(flowers_400, lambda paths: right(flowers_400))
    assert str(failure.value) == (
        "TODO 2 (make_training_dataset): expected it to read the shards in `paths`, its "
        "argument; given paths of shards that do not exist, it still gave a batch: it reads "
        "other files. Read them with read_shards(), from a dataset of `paths`."
    )


def test_check_training_dataset_of_images_at_the_shards_size_says_map_augment(flowers_400):
    """The batches at the shards' 48 px where the model takes 24: augment (which resizes)
    was not mapped over them."""
    make = _make_training_dataset()
    with pytest.raises(checks.CheckFailed) as failure:
        checks.check_training_dataset(make, flowers_400, todo=2, batch_size=16, image_size=24)
    assert str(failure.value) == (
        "TODO 2 (make_training_dataset): expected images of shape (16, 24, 24, 3); found "
        "(16, 48, 48, 3). Map augment over the batches (it resizes them to IMAGE_SIZE): "
        "map(augment) after batch()."
    )
