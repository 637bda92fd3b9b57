"""utils/checks/where_the_time_goes.py (lesson 8): the ceiling passes; each mistake is named."""

import atexit
import os
import shutil
import tempfile
from unittest import mock

import pytest
import tensorflow as tf

from utils import checks

BATCH = 4


def _jpegs(count=6, side=8):
    """Distinct small JPEGs, one size: what the lesson's stored_jpegs holds."""
    return [
        tf.io.encode_jpeg(tf.fill([side, side, 3], tf.constant(40 * i, tf.uint8))).numpy()
        for i in range(count)
    ]


FEATURES = {"image": tf.io.FixedLenFeature([], tf.string)}


def _shard(jpegs):
    """A TFRecord file of `jpegs`, in a temporary folder deleted at exit; returns its path."""
    folder = tempfile.mkdtemp()
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = os.path.join(folder, "images.tfrec")
    with tf.io.TFRecordWriter(path) as writer:
        for jpeg in jpegs:
            image = tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg]))
            example = tf.train.Example(features=tf.train.Features(feature={"image": image}))
            writer.write(example.SerializeToString())
    return path


def _decode_batch(jpegs):
    return tf.map_fn(
        lambda jpeg: tf.io.decode_jpeg(jpeg, channels=3), jpegs, fn_output_signature=tf.uint8
    )


def _decode_one(jpeg):
    return tf.io.decode_jpeg(jpeg, channels=3)


def _check(dataset, jpegs):
    # Four cores, whatever this machine has: a parallel map of 2 is then part of the machine.
    with mock.patch("utils.checks.where_the_time_goes.os.cpu_count", return_value=4):
        checks.check_ceiling_dataset(dataset, todo=1, stored_jpegs=jpegs, batch_size=BATCH)


def _source(jpegs):
    return tf.data.Dataset.from_tensor_slices(jpegs)


def test_the_lessons_answer_passes(capsys):
    jpegs = _jpegs()
    ceiling = _source(jpegs).repeat().batch(BATCH).map(_decode_batch, tf.data.AUTOTUNE)
    _check(ceiling, jpegs)
    assert capsys.readouterr().out == (
        "TODO 1 passed: endless batches of 4 decoded images (8 x 8 x 3, uint8) from memory, "
        "one parallel map call per batch.\n"
    )


def test_a_shuffled_ceiling_with_prefetch_passes():
    jpegs = _jpegs()
    ceiling = _source(jpegs).shuffle(6, seed=1).repeat().batch(BATCH)
    _check(ceiling.map(_decode_batch, tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE), jpegs)


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda jpegs: ...,
            "TODO 1 (ceiling_dataset): not done yet: ceiling_dataset is still ... (Ellipsis).",
        ),
        (
            lambda jpegs: _source(jpegs).batch(BATCH).map(_decode_batch, tf.data.AUTOTUNE),
            "TODO 1 (ceiling_dataset): expected it to go on without end (repeat()): the timer "
            "asks for more images than the 6 stored, and a dataset that ends stops it early.",
        ),
        (
            lambda jpegs: _source(jpegs).repeat().map(_decode_one, tf.data.AUTOTUNE).batch(BATCH),
            "TODO 1 (ceiling_dataset): expected batch(BATCH_SIZE) first, then "
            "map(decode_batch, ...); found a map that decodes one image per call.",
        ),
        (
            lambda jpegs: _source(jpegs).repeat().batch(BATCH).map(_decode_batch),
            "TODO 1 (ceiling_dataset): expected map(decode_batch, "
            "num_parallel_calls=tf.data.AUTOTUNE); found a map that decodes one batch at a "
            "time, on one core. The ceiling is what all 4 cores decode.",
        ),
        (
            lambda jpegs: _source(jpegs).repeat().batch(BATCH).map(_decode_batch, 2),
            "TODO 1 (ceiling_dataset): expected num_parallel_calls=tf.data.AUTOTUNE; found 2, "
            "fewer than this machine's 4 cores: that is a ceiling of part of the machine.",
        ),
        (
            lambda jpegs: (
                _source(jpegs).batch(BATCH).map(_decode_batch, tf.data.AUTOTUNE).cache().repeat()
            ),
            "TODO 1 (ceiling_dataset): expected no cache() after the decoding: a cache of "
            "decoded images is read from memory after the first pass",
        ),
        (
            lambda jpegs: (
                tf.data.Dataset.from_tensor_slices(_jpegs(6, side=16))
                .repeat()
                .batch(BATCH)
                .map(_decode_batch, tf.data.AUTOTUNE)
            ),
            "TODO 1 (ceiling_dataset): expected the decoded stored_jpegs; 4 of the first "
            "batch's 4 images are not one of them.",
        ),
        (
            lambda jpegs: (
                _source(jpegs)
                .repeat()
                .batch(BATCH)
                .map(lambda b: (_decode_batch(b), tf.zeros([BATCH])), tf.data.AUTOTUNE)
            ),
            "TODO 1 (ceiling_dataset): expected batches of images alone (no labels)",
        ),
        (
            lambda jpegs: (
                _source(jpegs)
                .repeat()
                .batch(BATCH)
                .map(lambda b: tf.cast(_decode_batch(b), tf.float32), tf.data.AUTOTUNE)
            ),
            "TODO 1 (ceiling_dataset): expected uint8 batches (batch, height, width, 3)",
        ),
        (
            lambda jpegs: (
                tf.data.TFRecordDataset(_shard(jpegs))
                .map(lambda r: tf.io.parse_single_example(r, FEATURES)["image"])
                .repeat()
                .batch(BATCH)
                .map(_decode_batch, tf.data.AUTOTUNE)
            ),
            "TODO 1 (ceiling_dataset): expected stored_jpegs from memory (from_tensor_slices); "
            "found a read of files.",
        ),
    ],
    ids=[
        "stub",
        "ends",
        "one image per call",
        "one core",
        "part of the cores",
        "cached decoded images",
        "other images",
        "with labels",
        "float32",
        "read from the shards",
    ],
)
def test_each_mistake_is_named(make, message):
    jpegs = _jpegs()
    with pytest.raises(checks.CheckFailed) as failure:
        _check(make(jpegs), jpegs)
    assert str(failure.value).startswith(message), str(failure.value)
