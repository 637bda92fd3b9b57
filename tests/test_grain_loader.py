"""Tests of tools/course_benchmark/grain_loader.py, grain_reads.py: copies, waits, batches."""

import os
import pickle
import subprocess
import sys
import threading

import numpy as np
import pytest

from tools.course_benchmark import grain_loader, grain_reads

pytest.importorskip("grain", reason="Grain is not installed: pip install -r requirements-grain.txt")
pytest.importorskip(
    "array_record", reason="array-record is not installed: pip install -r requirements-grain.txt"
)


@pytest.fixture(scope="module")
def copies(write_small_shards, tmp_path_factory):
    """(TFRecord shard paths, their ArrayRecord copies): the 60 images at 32 px, 2 shards."""
    shards = write_small_shards(2)
    return shards, grain_loader.ensure_array_records(shards, str(tmp_path_factory.mktemp("ar")))


def _tfrecords(path):
    import tensorflow as tf

    return [record.numpy() for record in tf.data.TFRecordDataset(path)]


def test_ensure_array_records_copies_each_shards_records_in_order(copies):
    shards, paths = copies
    assert [os.path.basename(p) for p in paths] == [
        os.path.basename(s).replace(".tfrec", ".array_record") for s in shards
    ]
    reads = grain_reads.StorageReads(paths)
    expected = [record for shard in shards for record in _tfrecords(shard)]
    assert len(reads) == len(expected) == 60
    assert [reads.read(0, key) for key in range(60)] == expected


def test_ensure_array_records_rewrites_a_damaged_copy_only(copies):
    shards, paths = copies
    untouched = os.stat(paths[1]).st_mtime_ns
    with open(paths[0], "r+b") as file:
        file.truncate(100)
    assert grain_loader.ensure_array_records(shards, os.path.dirname(paths[0])) == paths
    assert grain_reads.num_records(paths[0]) == len(_tfrecords(shards[0]))
    assert os.stat(paths[1]).st_mtime_ns == untouched
    assert [n for n in os.listdir(os.path.dirname(paths[0])) if "incomplete" in n] == []


def test_ensure_array_records_without_shards_says_so():
    with pytest.raises(ValueError, match=r"`shard_paths` must name at least one shard"):
        grain_loader.ensure_array_records([])


def test_missing_reason_names_the_package_and_the_requirement_file(monkeypatch):
    assert grain_loader.missing_reason() is None
    monkeypatch.setitem(sys.modules, "grain", None)
    reason = grain_loader.missing_reason()
    assert reason.startswith("Grain + ArrayRecord skipped: ")
    assert "grain" in reason and reason.endswith("`pip install -r requirements-grain.txt`.")


def test_storage_reads_wait_once_per_file_and_epoch_even_on_many_threads(copies):
    from utils import storage

    _, paths = copies
    simulated = storage.SimulatedStorage(latency_ms=30)
    reads = grain_reads.StorageReads(paths, simulated)
    threads = [
        threading.Thread(target=reads.read, args=(epoch, key))
        for epoch in (0, 1)
        for key in range(0, 60, 3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert simulated.num_requests == 4  # 2 files x 2 epochs.
    assert simulated.num_bytes_read == 2 * sum(os.path.getsize(path) for path in paths)


def test_storage_reads_with_a_request_per_record_wait_for_each_record(copies):
    from utils import storage

    _, paths = copies
    simulated = storage.SimulatedStorage(latency_ms=0)
    reads = grain_reads.StorageReads(paths, simulated, request_per_record=True)
    records = [reads.read(0, key) for key in (0, 1, 2, 59, 59)]
    assert simulated.num_requests == 5
    assert simulated.num_bytes_read == sum(len(record) + 16 for record in records)


def test_decode_record_matches_tensorflows_decoder_within_rounding(copies):
    import tensorflow as tf

    from utils import records

    shards, _ = copies
    record = _tfrecords(shards[0])[0]
    image, one_hot = grain_loader.decode_record(record, num_classes=5)
    parsed = records.parse_record(tf.constant(record))
    reference = tf.io.decode_jpeg(parsed["image"], channels=3).numpy()
    assert (image.shape, image.dtype, one_hot.dtype) == ((32, 32, 3), np.uint8, np.float32)
    assert np.abs(image.astype(int) - reference).max() <= 8
    np.testing.assert_array_equal(one_hot, parsed["one_hot_class"].numpy())


def test_grain_images_gives_each_record_once_per_epoch_in_batches(copies):
    shards, paths = copies
    batches = iter(grain_loader.grain_images(paths, num_classes=5, batch_size=20, num_threads=4))
    epoch = [next(batches) for _ in range(3)]
    batches.close()
    assert [images.shape for images, _ in epoch] == [(20, 32, 32, 3)] * 3
    labels = np.concatenate([one_hots for _, one_hots in epoch]).argmax(axis=1)
    expected = [
        int(np.argmax(grain_loader.decode_record(r, num_classes=5)[1]))
        for shard in shards
        for r in _tfrecords(shard)
    ]
    assert np.bincount(labels, minlength=5).tolist() == np.bincount(expected, minlength=5).tolist()


def test_grain_images_is_deterministic_for_a_seed(copies):
    _, paths = copies

    def first_labels(seed):
        batches = iter(grain_loader.grain_images(paths, num_classes=5, batch_size=30, seed=seed))
        _, one_hots = next(batches)
        batches.close()
        return one_hots.argmax(axis=1).tolist()

    assert first_labels(1) == first_labels(1)
    assert first_labels(1) != first_labels(2)


def test_decode_record_with_tensorflows_decoder_gives_its_pixels(copies):
    import tensorflow as tf

    from utils import records

    shards, _ = copies
    record = _tfrecords(shards[1])[3]
    image, _ = grain_loader.decode_record(record, num_classes=5, decoder="tensorflow")
    jpeg = records.parse_record(tf.constant(record))["image"]
    np.testing.assert_array_equal(image, tf.io.decode_jpeg(jpeg, channels=3).numpy())
    with pytest.raises(ValueError, match=r"`decoder` must be one of \('pillow', 'tensorflow'\)"):
        grain_loader.decode_record(record, num_classes=5, decoder="cv2")


def test_example_proto_parses_tensorflows_examples_to_the_same_bytes(copies):
    from tensorflow.core.example import example_pb2

    from tools.course_benchmark.example_proto import Example

    shards, _ = copies
    for record in _tfrecords(shards[0])[:5]:
        ours, theirs = Example.FromString(record), example_pb2.Example.FromString(record)
        assert set(ours.features.feature) == set(theirs.features.feature) >= {"image"}
        for name, feature in theirs.features.feature.items():
            assert ours.features.feature[name].SerializeToString() == feature.SerializeToString()
        assert example_pb2.Example.FromString(ours.SerializeToString()) == theirs


def test_a_worker_parses_and_decodes_without_importing_tensorflow(copies, tmp_path):
    shards, _ = copies
    record_file = tmp_path / "record.bin"
    record_file.write_bytes(_tfrecords(shards[0])[0])
    code = (
        "import sys, pathlib; from tools.course_benchmark import grain_loader; "
        f"image, _ = grain_loader.decode_record(pathlib.Path({str(record_file)!r}).read_bytes(), "
        "num_classes=5); print(image.shape, 'tensorflow' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(os.path.dirname(__file__)),
        check=True,
    )
    assert done.stdout.split("\n")[-2] == "(32, 32, 3) False"


def test_storage_reads_pickle_their_storage_as_settings_and_leave_out_an_empty_one(copies):
    from utils import storage

    _, paths = copies
    slow = pickle.loads(pickle.dumps(grain_reads.StorageReads(paths, storage.SimulatedStorage(30))))
    assert type(slow._storage) is storage.SimulatedStorage and slow._storage.latency_ms == 30
    assert slow.read(0, 5) == grain_reads.StorageReads(paths).read(0, 5)
    assert slow._storage.num_requests == 1  # The rebuilt storage is used, and counts.
    local = grain_reads.StorageReads(paths, storage.SimulatedStorage(latency_ms=0))
    assert local._storage is not None and pickle.loads(pickle.dumps(local))._storage is None


def test_grain_images_in_worker_processes_gives_each_record_once_per_epoch(copies):
    shards, paths = copies
    # No storage: a worker then imports no TensorFlow (the simulation's rebuild in a worker
    # is tested above), and starts in seconds.
    dataset = grain_loader.grain_images(paths, num_classes=5, batch_size=15, num_workers=2)
    batches = iter(dataset)
    # Each worker batches every other record, in turns: 2 batches each are the 60 records.
    epoch = [next(batches) for _ in range(4)]
    batches.close()
    assert [images.shape for images, _ in epoch] == [(15, 32, 32, 3)] * 4
    labels = np.concatenate([np.asarray(one_hots) for _, one_hots in epoch]).argmax(axis=1)
    expected = [
        int(np.argmax(grain_loader.decode_record(r, num_classes=5)[1]))
        for shard in shards
        for r in _tfrecords(shard)
    ]
    assert np.bincount(labels, minlength=5).tolist() == np.bincount(expected, minlength=5).tolist()
    with pytest.raises(ValueError, match=r"`num_workers` must be >= 0. Received: num_workers=-1"):
        grain_loader.grain_images(paths, num_classes=5, batch_size=20, num_workers=-1)
