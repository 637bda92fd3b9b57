"""Tests of utils/pipeline.py: the course's TFRecord pipeline and the decode ceiling."""

import numpy as np
import pytest
import tensorflow as tf

from utils import pipeline, records, storage
from utils.checks._base import dataset_ops, dataset_steps
from utils.lab import sources


@pytest.fixture(scope="module")
def shards(write_small_shards, small_flowers):
    return write_small_shards(4), sources.resolve_source(str(small_flowers))


def _records(paths):
    return list(tf.data.TFRecordDataset(paths).map(records.parse_record).as_numpy_iterator())


def test_parse_batch_matches_records_one_by_one(shards):
    paths, _ = shards
    serialized = list(tf.data.TFRecordDataset(paths).take(5).as_numpy_iterator())
    images, labels = pipeline.parse_batch(tf.constant(serialized), target_size=32, num_classes=5)
    assert images.dtype == tf.uint8 and images.shape == (5, 32, 32, 3)
    assert labels.dtype == tf.float32 and labels.shape == (5, 5)
    for index, record in enumerate(_records(paths)[:5]):
        assert np.array_equal(images[index], tf.io.decode_jpeg(record["image"]))
        assert int(np.argmax(labels[index])) == record["class"]


def test_tfrecord_images_yields_every_image_once_in_batches(shards):
    paths, source = shards
    dataset = pipeline.tfrecord_images(paths, target_size=32, num_classes=5, batch_size=16)
    assert dataset.element_spec[0].shape.as_list() == [None, 32, 32, 3]
    batches = list(dataset.as_numpy_iterator())
    # Order is not kept, so the last, smaller batch can come at any place.
    assert sorted(len(images) for images, _ in batches) == [12, 16, 16, 16]
    found = sorted(np.argmax(labels, axis=1).tolist() for _, labels in batches)
    wanted = sorted(record["class"] for record in _records(paths))
    assert sorted(sum(found, [])) == wanted
    assert dataset.options().deterministic is False
    assert dataset_ops(dataset)[-1] == "PrefetchDataset"


def test_tfrecord_images_repeats_the_file_names_before_the_reads(shards):
    paths, _ = shards
    twice = pipeline.tfrecord_images(paths, target_size=32, num_classes=5, batch_size=20, epochs=2)
    assert sum(len(images) for images, _ in twice.as_numpy_iterator()) == 120
    # One interleave over a repeated list of names: the epochs join before the reads.
    assert dataset_ops(twice)[:2] == ["TensorSliceDataset", "RepeatDataset"]
    endless = pipeline.tfrecord_images(
        paths, target_size=32, num_classes=5, batch_size=20, epochs=None
    )
    assert sum(len(images) for images, _ in endless.take(9).as_numpy_iterator()) == 180
    with pytest.raises(
        ValueError,
        match=r"`cache` needs `epochs=1`: call `repeat\(\)` on the cached dataset. "
        r"Received: epochs=None",
    ):
        pipeline.tfrecord_images(
            paths, target_size=32, num_classes=5, batch_size=8, epochs=None, cache=True
        )


def test_tfrecord_images_knobs_change_the_graph(shards):
    paths, _ = shards
    plain = pipeline.tfrecord_images(
        paths, target_size=32, num_classes=5, batch_size=8, prefetch=False, deterministic=True
    )
    cached = pipeline.tfrecord_images(
        paths, target_size=32, num_classes=5, batch_size=8, cache=True
    )
    assert "PrefetchDataset" not in dataset_ops(plain)
    assert plain.options().deterministic is True
    assert "CacheDatasetV2" in dataset_ops(cached)


def test_tfrecord_images_through_simulated_storage_keeps_order_when_asked(shards):
    paths, _ = shards
    simulated = storage.SimulatedStorage(latency_ms=10)
    ordered = pipeline.tfrecord_images(
        paths,
        target_size=32,
        num_classes=5,
        batch_size=60,
        storage=simulated,
        num_parallel_reads=4,
        deterministic=True,
    )
    ((images, _),) = list(ordered.as_numpy_iterator())
    reference = [tf.io.decode_jpeg(record["image"]).numpy() for record in _records(paths[:1])]
    assert np.array_equal(images[0], reference[0])  # Shard 0's first record comes first.
    assert simulated.num_requests == 4


def _interleave_order_attrs(dataset):
    """The `deterministic` attr of each interleave in the dataset's graph."""
    return [step.deterministic for step in dataset_steps(dataset) if "Interleave" in step.op]


@pytest.mark.parametrize(
    "num_parallel_reads, simulated",
    [(4, False), (tf.data.AUTOTUNE, False), (4, True)],
    ids=["4 reads, local disk", "AUTOTUNE, local disk", "4 reads, simulated storage"],
)
def test_tfrecord_images_any_order_reaches_the_reads(shards, num_parallel_reads, simulated):
    # TFRecordDataset(paths, num_parallel_reads=4) marks its interleave "true": it kept
    # the order whatever `deterministic` said. The course's reads leave it to the options.
    paths, _ = shards
    unordered = pipeline.tfrecord_images(
        paths,
        target_size=32,
        num_classes=5,
        batch_size=16,
        storage=storage.SimulatedStorage(latency_ms=0) if simulated else None,
        num_parallel_reads=num_parallel_reads,
        deterministic=False,
    )
    attrs = _interleave_order_attrs(unordered)
    assert attrs and "true" not in attrs
    assert unordered.options().deterministic is False


def test_tfrecord_images_deterministic_keeps_the_files_order(shards):
    paths, _ = shards
    ordered = pipeline.tfrecord_images(
        paths, target_size=32, num_classes=5, batch_size=60, deterministic=True
    )
    assert _interleave_order_attrs(ordered) == ["default"]
    assert ordered.options().deterministic is True
    ((images, _),) = list(ordered.as_numpy_iterator())
    # The four files read at once (16 asked), one record from each in turn.
    per_shard = [_records([path]) for path in paths]
    rounds = range(max(len(shard) for shard in per_shard))
    in_turn = [shard[i] for i in rounds for shard in per_shard if i < len(shard)]
    wanted = np.stack([tf.io.decode_jpeg(record["image"]).numpy() for record in in_turn])
    np.testing.assert_array_equal(images, wanted)


def test_decode_ceiling_decodes_batches_endlessly(shards):
    paths, _ = shards
    jpegs = [record["image"] for record in _records(paths)[:10]]
    batches = list(pipeline.decode_ceiling_dataset(jpegs, batch_size=4).take(5))
    assert [tuple(batch.shape) for batch in batches] == [(4, 32, 32, 3)] * 5
    assert np.array_equal(batches[0][0], tf.io.decode_jpeg(jpegs[0]))


@pytest.mark.parametrize(
    "target_size, image_size, ratio",
    [(192, 96, 2), (192, 32, 4), (64, 32, 2), (96, 96, 1), (100, 48, 2), (90, 60, 1)],
)
def test_decode_ratio_decodes_no_smaller_than_asked(target_size, image_size, ratio):
    assert pipeline.decode_ratio(target_size, image_size) == ratio


def test_decode_ratio_rejects_a_size_larger_than_stored():
    with pytest.raises(ValueError, match=r"Received: image_size=200"):
        pipeline.decode_ratio(192, 200)


def test_tfrecord_images_decodes_at_the_image_size(shards):
    paths, _ = shards
    full = pipeline.tfrecord_images(
        paths,
        target_size=32,
        num_classes=5,
        batch_size=8,
        num_parallel_reads=None,
        deterministic=True,
    )
    half = pipeline.tfrecord_images(
        paths,
        target_size=32,
        num_classes=5,
        batch_size=8,
        image_size=16,
        num_parallel_reads=None,
        deterministic=True,
    )
    (full_images, full_labels), (half_images, half_labels) = (next(iter(full)), next(iter(half)))
    assert half_images.shape == (8, 16, 16, 3) and half_images.dtype == tf.uint8
    np.testing.assert_array_equal(half_labels, full_labels)
    # DCT scaling: close to the mean of each 2 x 2 block of the full decode.
    pooled = tf.nn.avg_pool2d(tf.cast(full_images, tf.float32), 2, 2, "VALID")
    assert float(tf.reduce_mean(tf.abs(pooled - tf.cast(half_images, tf.float32)))) < 8
