"""Tests of utils/batch_sizes.py's fit_batch_size: a folder smaller than a batch, said plainly."""

import io

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from utils import batch_sizes, checks, pipeline, shard_files, storage
from utils.lab import conversion, sources


def test_fit_batch_size_of_a_30_record_folder_at_the_default_batch_says_what_to_set(capsys):
    assert batch_sizes.fit_batch_size(64, num_records=30) == 30
    assert capsys.readouterr().out == (
        "BATCH_SIZE is 64, but this folder holds 30 records; set BATCH_SIZE to at most 30. "
        "Batches of 30 are used meanwhile.\n"
    )


def test_fit_batch_size_of_a_large_enough_folder_keeps_the_batch_silently(capsys):
    assert batch_sizes.fit_batch_size(64, num_records=64) == 64
    assert batch_sizes.fit_batch_size(64, num_records=3670, parameter="BATCH") == 64
    assert capsys.readouterr().out == ""


def test_fit_batch_size_of_an_empty_folder_names_the_parameter():
    with pytest.raises(ValueError, match=r"^This folder holds no record: .* \(BATCH_SIZE\)\.$"):
        batch_sizes.fit_batch_size(64, num_records=0)


# Issue 52, item 3: lab 3's TODO 4 on a folder of 30 images at the default BATCH_SIZE (64).
def test_lab3_todo4_on_a_30_image_folder_passes_with_the_fitted_batch(tmp_path, capsys):
    rng = np.random.default_rng(52)
    for index in range(30):
        folder = tmp_path / "photos" / ("daisy", "roses", "tulips")[index % 3]
        folder.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        Image.fromarray(rng.integers(0, 255, (40, 40, 3), dtype=np.uint8)).save(buffer, "JPEG")
        (folder / f"{index}.jpg").write_bytes(buffer.getvalue())
    source = sources.resolve_source(str(tmp_path / "photos"))
    conversion.convert(source, tmp_path / "shards", target_size=32, num_shards=2)
    shard_paths = shard_files.find_shards(str(tmp_path / "shards"))
    capsys.readouterr()
    batch_size = batch_sizes.fit_batch_size(64, num_records=30)
    options = tf.data.Options()
    options.deterministic = False
    records = storage.read_tfrecords(shard_paths, num_parallel_reads=2).with_options(options)
    fast = records.batch(batch_size).map(
        lambda batch: pipeline.parse_batch(batch, target_size=32, num_classes=3),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    checks.check_fast_dataset(fast.prefetch(tf.data.AUTOTUNE), todo=4, batch_size=batch_size)
    assert capsys.readouterr().out.splitlines() == [
        "BATCH_SIZE is 64, but this folder holds 30 records; set BATCH_SIZE to at most 30. "
        "Batches of 30 are used meanwhile.",
        "TODO 4 passed: batches of 30 images of (32, 32, 3), prefetched.",
    ]
