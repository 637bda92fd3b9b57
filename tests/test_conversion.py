"""Tests of utils/lab/conversion.py: the round trip, safe writing, bad input, find-or-build."""

import hashlib
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from utils import records, shard_files, sidecar
from utils.lab import (
    conversion,
    data,
    shard_cache,
    sources,
    validation,
)


def _records(output_dir):
    shards = shard_files.find_shards(str(output_dir))
    return list(tf.data.TFRecordDataset(shards).map(records.parse_record).as_numpy_iterator())


def test_convert_writes_every_image_once_into_named_shards(converted, small_source):
    output_dir, report = converted
    assert report.shard_counts == [15, 15, 15, 15]
    assert [Path(p).name for p in report.shards] == [f"flowers{i:02d}-15.tfrec" for i in range(4)]
    assert report.num_written == small_source.num_images == 60 and report.skipped == []
    assert 0 < report.output_image_bytes < report.input_bytes
    assert sorted(p.name for p in Path(output_dir).iterdir()) == sorted(
        [Path(p).name for p in report.shards] + [sidecar.METADATA_FILE]
    )


def test_shards_round_trip_images_labels_and_original_sizes(converted, small_source):
    output_dir, _ = converted
    expected = {}
    for path in Path(small_source.pattern).parent.parent.glob("*/*.jpg"):
        image = tf.io.decode_jpeg(tf.io.read_file(str(path)), channels=3)
        reference = records.resize_and_crop(image, 64).numpy()
        expected.setdefault((path.parent.name, tuple(image.shape[:2])), []).append(reference)
    parsed = _records(output_dir)
    assert len(parsed) == 60
    for record in parsed:
        label = record["label"].decode()
        assert record["class"] == small_source.class_names.index(label)
        image = tf.io.decode_jpeg(record["image"]).numpy()
        assert image.shape == (64, 64, 3)
        candidates = expected[(label, tuple(record["size"]))]  # The ORIGINAL size.
        # JPEG at quality 90 of 64 px noisy images: ~6 levels; another image: 26 or more.
        assert min(np.abs(image.astype(float) - c).mean() for c in candidates) < 10


def test_rerun_with_fewer_shards_replaces_the_old_ones(small_source, tmp_path):
    conversion.convert(small_source, tmp_path, target_size=32, num_shards=4)
    conversion.convert(small_source, tmp_path, target_size=32, num_shards=3)
    names = [Path(p).name for p in shard_files.find_shards(str(tmp_path))]
    assert names == ["flowers00-20.tfrec", "flowers01-20.tfrec", "flowers02-20.tfrec"]
    assert validation.validate(str(tmp_path), verbose=False).ok


def test_interrupted_conversion_leaves_no_finished_looking_set(small_source, tmp_path):
    def failing_to_example(*args):
        raise KeyboardInterrupt

    steps = conversion.ConversionSteps(to_example=failing_to_example)
    with pytest.raises(KeyboardInterrupt):
        conversion.convert(small_source, tmp_path, target_size=32, num_shards=2, steps=steps)
    assert list(tmp_path.iterdir()) == []  # What the run wrote went with its own folder.
    with pytest.raises(FileNotFoundError, match="missing or unfinished"):
        sidecar.read_metadata(str(tmp_path))
    assert not validation.validate(str(tmp_path), verbose=False).ok
    conversion.convert(small_source, tmp_path, target_size=32, num_shards=2)
    assert validation.validate(str(tmp_path), verbose=False).ok
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "flowers00-30.tfrec",
        "flowers01-30.tfrec",
        sidecar.METADATA_FILE,
    ]


def test_bad_inputs_are_converted_or_counted_and_listed(tmp_path, capfd):
    capsys = capfd  # File-descriptor level: TensorFlow's C++ log lines are seen too.
    root = data.make_damaged_dataset(tmp_path / "damaged", images_per_class=2)
    source = sources.resolve_source(str(root))
    assert source.num_images == 16 and source.empty_class_folders == ("lilies",)
    assert "empty class folder(s), not used as classes: lilies" in source.describe()
    report = conversion.convert(source, tmp_path / "out", target_size=32, num_shards=2)
    skipped = {
        Path(image.path).relative_to(root).as_posix(): image.error for image in report.skipped
    }
    unreadable = {name for name, why in data.DAMAGED_FILES.items() if why.startswith("unreadable")}
    assert set(skipped) == unreadable
    assert skipped["daisy/empty.jpg"] == "Input is empty."
    assert "Unknown image file format" in skipped["roses/not_an_image.jpg"]
    assert skipped["daisy/truncated.jpg"].startswith(
        "jpeg::Uncompress failed. Invalid JPEG data or crop window. "
        "(the decoder logged: Premature end of JPEG data."
    )
    assert report.num_written == 13 and report.num_input_images == 16
    printed = capsys.readouterr()
    assert "Empty class folder(s), not used as classes: lilies" in printed.out
    assert printed.out.count("Premature end of JPEG data") == 1  # Once, in the skipped line.
    assert "jpeg_mem.cc" not in printed.err  # Not as TensorFlow's raw log line.
    written = {record["label"].decode() for record in _records(tmp_path / "out")}
    assert written == set(data.CLASSES)  # grayscale, CMYK and PNG inputs were written
    check = validation.validate(str(tmp_path / "out"))
    assert check.ok and check.num_records + len(check.skipped) == check.num_input_images == 16
    assert "Input images: 16 = 13 written + 3 skipped." in capsys.readouterr().out


def test_readable_odd_formats_become_rgb_records(tmp_path):
    root = data.make_damaged_dataset(tmp_path / "damaged", images_per_class=0)
    source = sources.resolve_source(str(root))
    conversion.convert(source, tmp_path / "out", target_size=32, num_shards=1)
    records = _records(tmp_path / "out")
    assert sorted(r["label"].decode() for r in records) == ["dandelion", "sunflowers", "tulips"]
    for record in records:
        assert tf.io.decode_jpeg(record["image"]).shape == (32, 32, 3)


def test_convert_rejects_bad_arguments(small_source, small_flowers):
    with pytest.raises(ValueError, match="`num_shards` must be a positive integer"):
        conversion.convert(small_source, "/tmp/x", num_shards=0)
    with pytest.raises(ValueError, match="inside the source's image folder"):
        conversion.convert(small_source, small_flowers / "shards")


def test_ensure_shards_reuses_a_finished_set_and_rewrites_a_changed_one(
    small_source, tmp_path, capsys
):
    first = shard_cache.ensure_shards(small_source, tmp_path, target_size=32, num_shards=2)
    assert first == shard_cache.ShardSet(
        output_dir=str(tmp_path),
        paths=[f"{tmp_path}/flowers00-30.tfrec", f"{tmp_path}/flowers01-30.tfrec"],
        class_names=list(small_source.class_names),
        num_records=60,
        record_counts={f"{tmp_path}/flowers00-30.tfrec": 30, f"{tmp_path}/flowers01-30.tfrec": 30},
        target_size=32,
        jpeg_quality=records.DEFAULT_JPEG_QUALITY,
        fingerprint=first.fingerprint,
    )
    stamp = hashlib.sha256((tmp_path / "flowers00-30.tfrec").read_bytes()).hexdigest()
    capsys.readouterr()
    again = shard_cache.ensure_shards(small_source, tmp_path, target_size=32, num_shards=2)
    assert capsys.readouterr().out == f"Found 2 shards in {tmp_path}.\n"
    assert again == first
    assert hashlib.sha256((tmp_path / "flowers00-30.tfrec").read_bytes()).hexdigest() == stamp
    changed = shard_cache.ensure_shards(small_source, tmp_path, target_size=48, num_shards=2)
    assert changed.target_size == 48 and changed.fingerprint != first.fingerprint


def test_default_output_dir_depends_on_source_and_settings(small_source):
    one = shard_cache.default_output_dir(small_source, target_size=192, num_shards=16)
    assert one.endswith("-192px-16shards")
    assert one != shard_cache.default_output_dir(small_source, target_size=192, num_shards=4)


def test_images_per_shard_gives_an_empty_run_to_a_shard_whose_images_all_failed():
    def image(path):
        return conversion.LoadedImage(path, 1, b"", 0, [1, 1])

    shard_of = {"a": 0, "b": 0, "c": 1, "d": 2}  # "c" failed to load: shard 1 has none.
    runs = conversion._images_per_shard(iter([image("a"), image("b"), image("d")]), shard_of, 3)
    assert [[i.path for i in run] for run in runs] == [["a", "b"], [], ["d"]]


def test_reshard_copies_the_records_once_without_converting_again(
    small_source, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv(data.CACHE_ENV_VAR, str(tmp_path / "cache"))
    shard_set = shard_cache.ensure_shards(
        small_source, tmp_path / "shards", target_size=16, num_shards=4, seed=3
    )
    original = list(tf.data.TFRecordDataset(shard_set.paths).as_numpy_iterator())

    def no_conversion(*args, **kwargs):
        raise AssertionError("reshard must not convert the images again")

    monkeypatch.setattr(conversion, "convert", no_conversion)
    assert shard_cache.reshard(shard_set, 4) == shard_set.paths
    paths = shard_cache.reshard(shard_set, 7)
    assert [Path(p).name for p in paths] == [
        f"flowers{i:02d}-{n}.tfrec" for i, n in enumerate([9, 9, 9, 9, 8, 8, 8])
    ]
    assert list(tf.data.TFRecordDataset(paths).as_numpy_iterator()) == original
    assert capsys.readouterr().out.endswith(
        f"Copied the 60 records into 7 shards in {Path(paths[0]).parent}.\n"
    )
    assert shard_cache.reshard(shard_set, 7) == paths  # Found, not written again.
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    "input_bytes, output_bytes, words",
    [(4_000, 1_000, "(75% saved)."), (1_000, 5_500, "(grew 5.5x).")],
    ids=["smaller", "grew"],
)
def test_conversion_summary_says_grew_for_images_that_grew(input_bytes, output_bytes, words):
    from utils.lab.conversion_report import ConversionReport

    report = ConversionReport(
        output_dir="out",
        shards=["out/a.tfrec"],
        shard_counts=[1],
        num_input_images=1,
        skipped=[],
        empty_class_folders=[],
        input_bytes=input_bytes,
        output_image_bytes=output_bytes,
        seconds=1.0,
    )
    line = report.summary().splitlines()[1]
    assert line == (
        f"Average bytes per image: {input_bytes:,} before, {output_bytes:,} after {words}"
    )
