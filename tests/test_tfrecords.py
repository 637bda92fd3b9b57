"""Tests of utils/tfrecords.py and utils/validation.py: the round trip, safe writing, bad input."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from utils import data, sources, tfrecords, validation


@pytest.fixture(scope="module")
def source(small_flowers):
    return sources.resolve_source(str(small_flowers))


@pytest.fixture(scope="module")
def converted(source, tmp_path_factory):
    output_dir = tmp_path_factory.mktemp("shards")
    report = tfrecords.convert(source, output_dir, target_size=64, num_shards=4, seed=3)
    return output_dir, report


def _records(output_dir):
    shards = tfrecords.find_shards(str(output_dir))
    return list(tf.data.TFRecordDataset(shards).map(tfrecords.parse_record).as_numpy_iterator())


def test_resize_and_crop_keeps_proportions_and_takes_the_centre():
    # A 100x200 image: left quarter red, middle half green, right quarter blue.
    image = np.zeros((100, 200, 3), np.uint8)
    image[:, :50, 0] = image[:, 50:150, 1] = image[:, 150:, 2] = 255
    square = tfrecords.resize_and_crop(tf.constant(image), 50)
    assert square.dtype == tf.uint8 and square.shape == (50, 50, 3)
    # The centre crop of a 50x100 resize is the green middle half (edges blur a little).
    inside = square.numpy()[:, 2:-2]
    assert inside[:, :, 1].min() == 255 and inside[:, :, [0, 2]].max() == 0
    assert square.numpy()[:, :, 1].mean() > 240


def test_recompress_gives_jpeg_that_decodes_to_the_image():
    image = np.full((32, 32, 3), 120, np.uint8)
    jpeg = tfrecords.recompress(tf.constant(image), 90)
    assert jpeg.numpy()[:2] == b"\xff\xd8"
    assert np.abs(tf.io.decode_jpeg(jpeg).numpy().astype(int) - 120).max() <= 2


def test_to_example_round_trips_through_the_schema():
    example = tfrecords.to_example(b"jpeg", 2, [300, 400], data.CLASSES)
    record = tfrecords.parse_record(tf.constant(example.SerializeToString()))
    assert record["image"].numpy() == b"jpeg"
    assert record["class"].numpy() == 2 and record["label"].numpy() == b"roses"
    assert record["size"].numpy().tolist() == [300, 400]
    assert record["one_hot_class"].numpy().tolist() == [0, 0, 1, 0, 0]


def test_shard_names_carry_index_and_count():
    assert tfrecords.shard_name(0, 230) == "flowers00-230.tfrec"
    assert tfrecords.shard_name(12, 7) == "flowers12-7.tfrec"
    assert tfrecords.shard_record_count("gs://b/x/flowers12-7.tfrec") == 7
    assert tfrecords.shard_record_count("/x/flowers-00003-of-00016.tfrecord") is None


def test_find_shards_knows_course_and_beam_names_only(tmp_path):
    for name in ["flowers00-3.tfrec", "flowers-00000-of-00002.tfrecord", "flowers01.tfrec.tmp",
                 "notes.txt", tfrecords.METADATA_FILE]:  # fmt: skip
        (tmp_path / name).write_bytes(b"")
    found = [Path(p).name for p in tfrecords.find_shards(str(tmp_path))]
    assert found == ["flowers-00000-of-00002.tfrecord", "flowers00-3.tfrec"]
    assert tfrecords.find_shards(str(tmp_path / "missing")) == []


def test_convert_writes_every_image_once_into_named_shards(converted, source):
    output_dir, report = converted
    assert report.shard_counts == [15, 15, 15, 15]
    assert [Path(p).name for p in report.shards] == [f"flowers{i:02d}-15.tfrec" for i in range(4)]
    assert report.num_written == source.num_images == 60 and report.skipped == []
    assert 0 < report.output_image_bytes < report.input_bytes
    assert sorted(p.name for p in Path(output_dir).iterdir()) == sorted(
        [Path(p).name for p in report.shards] + [tfrecords.METADATA_FILE]
    )


def test_shards_round_trip_images_labels_and_original_sizes(converted, source):
    output_dir, _ = converted
    expected = {}
    for path in Path(source.pattern).parent.parent.glob("*/*.jpg"):
        image = tf.io.decode_jpeg(tf.io.read_file(str(path)), channels=3)
        reference = tfrecords.resize_and_crop(image, 64).numpy()
        expected.setdefault((path.parent.name, tuple(image.shape[:2])), []).append(reference)
    records = _records(output_dir)
    assert len(records) == 60
    for record in records:
        label = record["label"].decode()
        assert record["class"] == source.class_names.index(label)
        image = tf.io.decode_jpeg(record["image"]).numpy()
        assert image.shape == (64, 64, 3)
        candidates = expected[(label, tuple(record["size"]))]  # The ORIGINAL size.
        # JPEG at quality 90 of 64 px noisy images: ~6 levels; another image: 26 or more.
        assert min(np.abs(image.astype(float) - c).mean() for c in candidates) < 10


def test_shards_mix_the_classes(converted):
    output_dir, _ = converted
    report = validation.validate(str(output_dir), verbose=False)
    assert all(len(shard.class_counts) >= 3 for shard in report.shards)


def test_sidecar_describes_the_set(converted, source):
    output_dir, report = converted
    metadata = tfrecords.read_metadata(str(output_dir))
    assert metadata["class_names"] == list(source.class_names)
    assert metadata["target_size"] == 64 and metadata["num_records"] == 60
    assert metadata["shards"] == {Path(p).name: 15 for p in report.shards}
    assert set(metadata["schema"]) == set(tfrecords.FEATURES)


def test_validate_passes_on_a_complete_set(converted, capsys):
    output_dir, _ = converted
    report = validation.validate(str(output_dir))
    assert report.ok and report.num_records == 60 and report.num_input_images == 60
    out = capsys.readouterr().out
    assert "Input images: 60 = 60 written + 0 skipped." in out
    assert "Valid: every record parses" in out


def test_rerun_with_fewer_shards_replaces_the_old_ones(source, tmp_path):
    tfrecords.convert(source, tmp_path, target_size=32, num_shards=4)
    tfrecords.convert(source, tmp_path, target_size=32, num_shards=3)
    names = [Path(p).name for p in tfrecords.find_shards(str(tmp_path))]
    assert names == ["flowers00-20.tfrec", "flowers01-20.tfrec", "flowers02-20.tfrec"]
    assert validation.validate(str(tmp_path), verbose=False).ok


def test_interrupted_conversion_leaves_no_finished_looking_set(source, tmp_path):
    def failing_to_example(*args):
        raise KeyboardInterrupt

    steps = tfrecords.ConversionSteps(to_example=failing_to_example)
    with pytest.raises(KeyboardInterrupt):
        tfrecords.convert(source, tmp_path, target_size=32, num_shards=2, steps=steps)
    assert tfrecords.find_shards(str(tmp_path)) == []
    with pytest.raises(FileNotFoundError, match="missing or unfinished"):
        tfrecords.read_metadata(str(tmp_path))
    report = validation.validate(str(tmp_path), verbose=False)
    assert not report.ok
    assert any("a conversion into this folder did not finish" in p for p in report.problems)
    tfrecords.convert(source, tmp_path, target_size=32, num_shards=2)  # A re-run cleans up.
    assert validation.validate(str(tmp_path), verbose=False).ok
    assert not list(tmp_path.glob("*.tmp"))


def test_bad_inputs_are_converted_or_counted_and_listed(tmp_path, capsys):
    root = data.make_damaged_dataset(tmp_path / "damaged", images_per_class=2)
    source = sources.resolve_source(str(root))
    assert source.num_images == 16 and source.empty_class_folders == ("lilies",)
    assert "empty class folder(s), not used as classes: lilies" in source.describe()
    report = tfrecords.convert(source, tmp_path / "out", target_size=32, num_shards=2)
    skipped = {
        Path(image.path).relative_to(root).as_posix(): image.error for image in report.skipped
    }
    unreadable = {name for name, why in data.DAMAGED_FILES.items() if why.startswith("unreadable")}
    assert set(skipped) == unreadable
    assert skipped["daisy/empty.jpg"] == "Input is empty."
    assert "Unknown image file format" in skipped["roses/not_an_image.jpg"]
    assert report.num_written == 13 and report.num_input_images == 16
    assert "Empty class folder(s), not used as classes: lilies" in capsys.readouterr().out
    written = {record["label"].decode() for record in _records(tmp_path / "out")}
    assert written == set(data.CLASSES)  # grayscale, CMYK and PNG inputs were written
    check = validation.validate(str(tmp_path / "out"))
    assert check.ok and check.num_records + len(check.skipped) == check.num_input_images == 16
    assert "Input images: 16 = 13 written + 3 skipped." in capsys.readouterr().out


def test_readable_odd_formats_become_rgb_records(tmp_path):
    root = data.make_damaged_dataset(tmp_path / "damaged", images_per_class=0)
    source = sources.resolve_source(str(root))
    tfrecords.convert(source, tmp_path / "out", target_size=32, num_shards=1)
    records = _records(tmp_path / "out")
    assert sorted(r["label"].decode() for r in records) == ["dandelion", "sunflowers", "tulips"]
    for record in records:
        assert tf.io.decode_jpeg(record["image"]).shape == (32, 32, 3)


def test_validate_finds_a_count_that_does_not_match_the_name(converted, tmp_path):
    output_dir, report = converted
    for path in Path(output_dir).iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    first = tmp_path / Path(report.shards[0]).name
    first.rename(tmp_path / "flowers00-16.tfrec")
    metadata = json.loads((tmp_path / tfrecords.METADATA_FILE).read_text())
    for key in ("shards", "shard_bytes"):
        metadata[key]["flowers00-16.tfrec"] = metadata[key].pop(first.name)
    (tmp_path / tfrecords.METADATA_FILE).write_text(json.dumps(metadata))
    result = validation.validate(str(tmp_path), verbose=False)
    assert "flowers00-16.tfrec: its name says 16 records; it holds 15." in result.problems


def test_validate_finds_lost_images_and_bad_records(converted, tmp_path):
    output_dir, report = converted
    for path in Path(output_dir).iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    metadata = json.loads((tmp_path / tfrecords.METADATA_FILE).read_text())
    metadata["num_input_images"] = 61
    (tmp_path / tfrecords.METADATA_FILE).write_text(json.dumps(metadata))
    with tf.io.TFRecordWriter(str(tmp_path / "flowers01-15.tfrec")) as writer:
        writer.write(b"not an example")
    result = validation.validate(str(tmp_path), verbose=False)
    assert not result.ok
    assert any(p.startswith("flowers01-15.tfrec: record 0 does not parse") for p in result.problems)
    assert any("image(s) unaccounted for" in p for p in result.problems)


def test_validate_without_sidecar_says_so(tmp_path):
    result = validation.validate(str(tmp_path), verbose=False)
    assert not result.ok
    assert any("No flowers_tfrecords.json" in p for p in result.problems)
    assert (
        f"0 shard-like file(s) in {tmp_path}; their records are not checked without the sidecar."
        in result.problems
    )


def test_convert_rejects_bad_arguments(source, small_flowers):
    with pytest.raises(ValueError, match="`num_shards` must be a positive integer"):
        tfrecords.convert(source, "/tmp/x", num_shards=0)
    with pytest.raises(ValueError, match="inside the source's image folder"):
        tfrecords.convert(source, small_flowers / "shards")


def test_ensure_shards_reuses_a_finished_set_and_rewrites_a_changed_one(source, tmp_path, capsys):
    first = tfrecords.ensure_shards(source, tmp_path, target_size=32, num_shards=2)
    assert first["num_records"] == 60 and first["output_dir"] == str(tmp_path)
    stamp = hashlib.sha256((tmp_path / "flowers00-30.tfrec").read_bytes()).hexdigest()
    capsys.readouterr()
    again = tfrecords.ensure_shards(source, tmp_path, target_size=32, num_shards=2)
    assert capsys.readouterr().out == f"Found 2 shards in {tmp_path}.\n"
    assert again == first
    assert hashlib.sha256((tmp_path / "flowers00-30.tfrec").read_bytes()).hexdigest() == stamp
    changed = tfrecords.ensure_shards(source, tmp_path, target_size=48, num_shards=2)
    assert changed["target_size"] == 48


def test_default_output_dir_depends_on_source_and_settings(source):
    one = tfrecords.default_output_dir(source, target_size=192, num_shards=16)
    assert one.endswith("-192px-16shards")
    assert one != tfrecords.default_output_dir(source, target_size=192, num_shards=4)
