"""Lesson 9's grain_arrayrecord.py: ArrayRecord copies, records parsed without TF, timing."""

import itertools
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tools.building.lesson_parameters import missing_modules
from utils import records, storage
from utils.lessons.grain_arrayrecord import grain_arrayrecord

pytestmark = pytest.mark.skipif(
    bool(missing_modules("09_grain_arrayrecord")), reason="lesson 9 needs grain and array_record"
)


@pytest.fixture(scope="module")
def shards(write_small_shards):
    return write_small_shards(2)


def test_write_array_records_copies_each_shard_record_for_record(shards, tmp_path):
    import grain

    paths = grain_arrayrecord.write_array_records(shards, str(tmp_path))
    assert [os.path.basename(p) for p in paths] == [
        os.path.basename(s).replace(".tfrec", ".array_record") for s in shards
    ]
    tfrecords = [r.numpy() for r in tf.data.TFRecordDataset(shards)]
    source = grain.sources.ArrayRecordDataSource(paths)
    assert [source[i] for i in range(len(source))] == tfrecords
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in paths)


def test_write_array_records_rewrites_a_damaged_copy_and_keeps_a_whole_one(shards, tmp_path):
    paths = grain_arrayrecord.write_array_records(shards, str(tmp_path))
    kept = os.stat(paths[1]).st_mtime_ns
    with open(paths[0], "wb") as damaged:
        damaged.write(b"not an array record")
    assert grain_arrayrecord.count_records(paths[0]) == -1
    grain_arrayrecord.write_array_records(shards, str(tmp_path))
    assert grain_arrayrecord.count_records(paths[0]) > 0
    assert os.stat(paths[1]).st_mtime_ns == kept


@pytest.mark.parametrize(
    "shard_paths, output_dir, message",
    [
        ([], "/tmp/x", r"`shard_paths` must name at least one shard"),
        (["a.tfrec"], "gs://bucket/x", r"`output_dir` must be a local folder. Received: gs://"),
    ],
    ids=["no shards", "gs output"],
)
def test_write_array_records_refuses_bad_input(shard_paths, output_dir, message):
    with pytest.raises(ValueError, match=message):
        grain_arrayrecord.write_array_records(shard_paths, output_dir)


def test_parse_record_gives_what_tensorflow_parses(shards):
    record = next(iter(tf.data.TFRecordDataset(shards[0]))).numpy()
    parsed = records.parse_record(tf.constant(record))
    image, one_hot = grain_arrayrecord.parse_record(record, num_classes=5)
    expected = tf.io.decode_jpeg(parsed["image"], channels=3).numpy()
    assert image.dtype == np.uint8 and image.shape == expected.shape
    # Both libjpeg-turbo, with other IDCTs (Pillow's exact one, TensorFlow's fast one).
    assert np.abs(image.astype(int) - expected).mean() < 2
    assert one_hot.dtype == np.float32 and one_hot.argmax() == int(parsed["class"])
    small, _ = grain_arrayrecord.parse_record(record, num_classes=5, image_size=8)
    assert small.shape == (8, 8, 3)


def test_parse_record_refuses_other_records_and_label_lengths(shards):
    record = next(iter(tf.data.TFRecordDataset(shards[0]))).numpy()
    with pytest.raises(ValueError, match=r"label has 5 classes. Received: num_classes=3"):
        grain_arrayrecord.parse_record(record, num_classes=3)
    empty = tf.train.Example().SerializeToString()
    with pytest.raises(ValueError, match=r"no `image` feature"):
        grain_arrayrecord.parse_record(empty, num_classes=5)


def test_parse_record_runs_without_tensorflow(shards):
    record = next(iter(tf.data.TFRecordDataset(shards[0]))).numpy()
    code = (
        "import sys; from utils.lessons.grain_arrayrecord import grain_arrayrecord as g; "
        f"image, _ = g.parse_record({record!r}, num_classes=5); "
        "print(image.shape, 'tensorflow' in sys.modules)"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert out.stdout.strip() == "(32, 32, 3) False", out.stderr[-2000:]


def test_storage_source_waits_once_per_file_and_pickles_its_settings(shards, tmp_path):
    paths = grain_arrayrecord.write_array_records(shards, str(tmp_path))
    simulated = storage.SimulatedStorage(5, megabytes_per_second=1000)
    source = grain_arrayrecord.StorageSource(paths, simulated)
    counts = [grain_arrayrecord.count_records(p) for p in paths]
    assert len(source) == sum(counts)
    read = [source[i] for i in range(len(source))] + [source[0]]
    assert read[:-1] == [r.numpy() for r in tf.data.TFRecordDataset(shards)]
    assert simulated.num_requests == len(paths)  # One open per file, kept open.
    copy = pickle.loads(pickle.dumps(source))
    assert copy[counts[0]] == read[counts[0]]
    assert copy._storage is not simulated and copy._storage.latency_ms == 5
    assert copy._storage.megabytes_per_second == 1000 and copy._storage.num_requests == 1


def test_batch_timer_times_batches_after_the_first():
    batches = ((np.zeros((4, 2)), np.zeros(4)) for _ in itertools.count())
    run = grain_arrayrecord.batch_timer(batches, num_images=10)
    assert run() > 0
    taken = []
    counted = ((np.zeros((4, 2)), taken.append(1)) for _ in itertools.count())
    grain_arrayrecord.batch_timer(counted, num_images=10, num_warmup_images=5)()
    # The first batch, then 2 batches of 4 for 5 warm-up images, then 3 for 10 images.
    assert len(taken) == 1 + 2 + 3


def test_use_flag_defaults_marks_absl_flags_parsed():
    from absl import flags

    grain_arrayrecord.use_flag_defaults()
    assert flags.FLAGS.is_parsed()
