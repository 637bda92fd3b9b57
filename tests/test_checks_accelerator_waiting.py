"""utils/checks/accelerator_waiting.py (lesson 5): right answers pass, mistakes name the TODO."""

import re
import time

import numpy as np
import pytest
import tensorflow as tf

from utils import checks
from utils.checks import accelerator_waiting


def _pipeline():
    """Endless batches that differ from one to the next, like a pipeline's."""
    images = tf.reshape(tf.range(6 * 4 * 4 * 3) % 256, [6, 4, 4, 3])
    labels = tf.one_hot(tf.range(6) % 5, 5)
    records = tf.data.Dataset.from_tensor_slices((tf.cast(images, tf.uint8), labels))
    return records.batch(2, drop_remainder=True).repeat()


def test_check_in_memory_passes_one_batch_repeated(capsys):
    pipeline = _pipeline()
    in_memory = tf.data.Dataset.from_tensors(next(iter(pipeline))).repeat()
    checks.check_in_memory(in_memory, todo=1, pipeline=pipeline)
    assert capsys.readouterr().out == (
        "TODO 1 passed: one batch of (2, 4, 4, 3), (2, 5), repeated without end.\n"
    )


def test_check_in_memory_passes_a_cached_first_batch():
    pipeline = _pipeline()
    checks.check_in_memory(pipeline.take(1).cache().repeat(), todo=1, pipeline=pipeline)


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda pipeline: ...,
            "TODO 1 (in_memory): not done yet: in_memory is still ... (Ellipsis). Expected a "
            "tf.data.Dataset: one batch of the pipeline, held in memory and repeated without end.",
        ),
        (
            lambda pipeline: next(iter(pipeline)),
            "TODO 1 (in_memory): expected a tf.data.Dataset: one batch of the pipeline, held in "
            "memory and repeated without end; found a tuple.",
        ),
        (
            lambda pipeline: tf.data.Dataset.from_tensors(next(iter(pipeline))),
            "TODO 1 (in_memory): expected an endless dataset (training reads it for many "
            "steps); found one that ends after 1 batch(es). Add `.repeat()`.",
        ),
        (
            lambda pipeline: pipeline,
            "TODO 1 (in_memory): expected the same batch again and again (an input that costs "
            "nothing); found different batches in the first 3: it still reads and decodes.",
        ),
        (
            lambda pipeline: tf.data.Dataset.from_tensors(next(iter(pipeline))[0]).repeat(),
            "TODO 1 (in_memory): expected elements like the pipeline's",
        ),
    ],
    ids=["stub", "a batch, not a dataset", "no repeat", "the pipeline itself", "images only"],
)
def test_check_in_memory_names_todo_1_and_the_mistake(make, message):
    pipeline = _pipeline()
    with pytest.raises(checks.CheckFailed, match=re.escape(message)):
        checks.check_in_memory(make(pipeline), todo=1, pipeline=pipeline)


def _slow_records():
    """Endless records that take 2 ms each to decode (a sleep), as lesson 5's `read_tfrecord`."""

    def decode(index):
        def slowly(value):
            time.sleep(0.002)
            return np.full([3], value, np.float32)

        image = tf.numpy_function(slowly, [index], tf.float32, stateful=True)
        return tf.ensure_shape(image, [3]), tf.one_hot(index % 5, 5)

    return tf.data.Dataset.range(10**6), decode


def _naive():
    records, decode = _slow_records()
    options = tf.data.Options()
    options.experimental_optimization.map_and_batch_fusion = False
    options.experimental_optimization.map_parallelization = False
    options.experimental_optimization.inject_prefetch = False
    return records.map(decode).batch(4, drop_remainder=True).with_options(options)


def _made_ahead():
    records, decode = _slow_records()
    dataset = records.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.batch(4, drop_remainder=True).prefetch(tf.data.AUTOTUNE)


PASSED_FEED = (
    "TODO 2 passed: new batches, decoded in parallel and made ahead of the step (prefetch last).\n"
)


def test_check_feed_keeps_up_passes_a_parallel_prefetched_feed(capsys):
    accelerator_waiting.check_feed_keeps_up(_made_ahead(), todo=2, naive=_naive())
    assert capsys.readouterr().out == PASSED_FEED


def test_check_feed_keeps_up_passes_right_feeds_written_otherwise(capsys):
    """Lab 1's parallel map of NUM_PARALLEL_READS with a prefetch of 2; the naive feed's own
    graph with a parallel map (its options kept); map and batch fused by hand."""
    records, decode = _slow_records()
    numbered = records.map(decode, num_parallel_calls=16).batch(4, drop_remainder=True)
    fused = records.apply(
        tf.data.experimental.map_and_batch(decode, 4, num_parallel_calls=4, drop_remainder=True)
    )
    with_options = (
        records.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
        .batch(4, drop_remainder=True)
        .with_options(_naive().options())
        .prefetch(tf.data.AUTOTUNE)
    )
    for feed in (numbered.prefetch(2), fused.prefetch(tf.data.AUTOTUNE), with_options):
        accelerator_waiting.check_feed_keeps_up(feed, todo=2, naive=_naive())
    assert capsys.readouterr().out == PASSED_FEED * 3


def _unbatched():
    records, decode = _slow_records()
    return records.map(decode, num_parallel_calls=tf.data.AUTOTUNE).prefetch(1)


def _not_full():
    records, decode = _slow_records()
    return records.map(decode, num_parallel_calls=4).batch(4).prefetch(2)


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: ...,
            "TODO 2 (feed): not done yet: feed is still ... (Ellipsis). Expected a "
            "tf.data.Dataset of the naive feed's batches that keeps the accelerator busy.",
        ),
        (
            _unbatched,
            "TODO 2 (feed): expected batches like the naive feed's, (4, 3), (4, 5); found (3,), "
            "(5,). Batch the decoded images as the naive feed does, every batch full "
            "(`drop_remainder=True`).",
        ),
        (
            _not_full,
            "TODO 2 (feed): expected batches like the naive feed's, (4, 3), (4, 5); found "
            "(None, 3), (None, 5).",
        ),
        (
            lambda: tf.data.Dataset.from_tensors(next(iter(_naive()))).repeat(),
            "TODO 2 (feed): expected new batches from the shards; found the same batch again "
            "(an input that costs nothing, as TODO 1's). Build the feed from "
            "`read_shards(shard_names)` and `read_tfrecord`.",
        ),
        (
            _naive,
            "TODO 2 (feed): expected images decoded several at once and batches made ahead of "
            "the step; found a feed that lacks one. Decode in parallel: `map(read_tfrecord, "
            "num_parallel_calls=tf.data.AUTOTUNE)`, then batch and prefetch.",
        ),
        (  # A prefetch alone: one batch at a time, made ahead (issue 61).
            lambda: _naive().prefetch(tf.data.AUTOTUNE),
            "Decode in parallel: `map(read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE)`",
        ),
        (
            lambda: (
                _slow_records()[0]
                .map(_slow_records()[1], num_parallel_calls=4)
                .batch(4, drop_remainder=True)
            ),
            "Make the next batches while the step runs: `prefetch(tf.data.AUTOTUNE)` last.",
        ),
    ],
    ids=[
        "stub",
        "not batched",
        "no drop_remainder",
        "one batch repeated",
        "the naive feed",
        "the naive feed prefetched",
        "no prefetch",
    ],
)
def test_check_feed_keeps_up_names_todo_2_and_the_mistake(make, message):
    with pytest.raises(checks.CheckFailed, match=re.escape(message)):
        accelerator_waiting.check_feed_keeps_up(make(), todo=2, naive=_naive())


def test_what_is_missing_reads_the_feeds_steps():
    records, decode = _slow_records()
    parallel = records.map(decode, num_parallel_calls=2).batch(4, drop_remainder=True)
    assert accelerator_waiting._what_is_missing(parallel).endswith(
        "`prefetch(tf.data.AUTOTUNE)` last."
    )
    assert accelerator_waiting._what_is_missing(_naive()).startswith("Decode in parallel")
