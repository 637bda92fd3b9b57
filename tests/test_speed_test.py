"""utils/lessons/read_tfrecords/speed_test.py: what lab 3 prints around its speed test."""

import os
import re

import pytest
import tensorflow as tf

from utils import storage
from utils.comparison import RepeatedResult
from utils.lab.shard_cache import ShardSet
from utils.lessons.read_tfrecords import speed_test

CLASSES = ["daisy", "dandelion", "roses", "sunflowers", "tulips"]


@pytest.fixture(scope="module")
def shards(write_small_shards):
    """The 60 small images in 4 shards, as the `ShardSet` lab 3 reads."""
    paths = [str(path) for path in write_small_shards(4)]
    counts = {path: sum(1 for _ in tf.data.TFRecordDataset(path)) for path in paths}
    return ShardSet(os.path.dirname(paths[0]), paths, CLASSES, 60, counts, 32, 90, None)


def test_describe_shards_says_count_size_records_and_classes(shards):
    megabytes = sum(os.path.getsize(path) for path in shards.paths) / 1e6 / 4
    assert speed_test.describe_shards(shards) == (
        f"4 shards of {megabytes:.1f} MB, 60 records; 5 classes: daisy, dandelion, roses, "
        "sunflowers, tulips"
    )


def test_shards_in_flight_counts_one_pass_and_names_autotune(shards):
    simulated = storage.SimulatedStorage(latency_ms=30)
    names = tf.data.Dataset.from_tensor_slices(shards.paths)
    one = names.interleave(simulated.open_tfrecord, cycle_length=1, num_parallel_calls=1)
    simulated.num_requests = 99  # Reset by the count: only this pass is counted.
    line = speed_test.shards_in_flight(one.take(60), simulated, 1)
    assert re.fullmatch(
        rf"num_parallel_reads=1: 60 records, at most [1-4] shards in flight, on "
        rf"{os.cpu_count()} cores\.",
        line,
    ), line
    assert simulated.num_requests == 4
    autotuned = names.interleave(simulated.open_tfrecord, num_parallel_calls=tf.data.AUTOTUNE)
    line = speed_test.shards_in_flight(autotuned, simulated, tf.data.AUTOTUNE)
    assert line.startswith("num_parallel_reads=AUTOTUNE: 60 records, at most ")


def test_reading_order_names_the_step_that_keeps_the_files_order(shards):
    integer_reads = tf.data.TFRecordDataset(shards.paths, num_parallel_reads=4)
    assert speed_test.reading_order(integer_reads, "tf_reader") == (
        "tf_reader, options.deterministic=False: the files' order: its "
        'LegacyParallelInterleaveDatasetV2 is marked deterministic "true".'
    )
    names = tf.data.Dataset.from_tensor_slices(shards.paths)
    interleaved = names.interleave(tf.data.TFRecordDataset, 4, num_parallel_calls=4)
    assert speed_test.interleave_orders(interleaved) == [("ParallelInterleaveDatasetV4", "default")]
    # "default" follows the options, which reading_order sets to any order.
    assert speed_test.reading_order(interleaved, "interleave") == (
        "interleave, options.deterministic=False: any order."
    )
    assert speed_test.interleave_orders(tf.data.TFRecordDataset(shards.paths)) == []


def test_summary_divides_the_last_by_the_first_two_round_by_round():
    runs = {
        "files, one at a time": RepeatedResult("files, one at a time", (10.0, 12.0, 8.0)),
        "files, parallel": RepeatedResult("files, parallel", (100.0, 150.0, 80.0)),
        "shards, AUTOTUNE reads": RepeatedResult("shards, AUTOTUNE reads", (1.0, 1.0, 1.0)),
        "shards, parallel reads": RepeatedResult("shards, parallel reads", (1000.0, 1500.0, 900.0)),
    }
    assert speed_test.summary(runs) == (
        "On the same simulated storage (medians of 3 rounds in turns): individual files "
        "10.0 images/s one at a time, 100 in parallel; the shards read in parallel 1,000 "
        "images/s. Median of the per-round ratios: 112x the first (100-125x) and 10.0x the "
        "second (10.0-11.2x)."
    )
