"""Tests of utils/lab/validation.py: a finished set of shards is checked record by record."""

import json
from pathlib import Path

import tensorflow as tf

from utils import sidecar
from utils.lab import validation


def test_shards_mix_the_classes(converted):
    output_dir, _ = converted
    report = validation.validate(str(output_dir), verbose=False)
    assert all(len(shard.class_counts) >= 3 for shard in report.shards)


def test_validate_passes_on_a_complete_set(converted, capsys):
    output_dir, _ = converted
    report = validation.validate(str(output_dir))
    assert report.ok and report.num_records == 60 and report.num_input_images == 60
    out = capsys.readouterr().out
    assert "Input images: 60 = 60 written + 0 skipped." in out
    assert "Valid: every record parses" in out


def test_validate_finds_a_count_that_does_not_match_the_name(converted, tmp_path):
    output_dir, report = converted
    for path in Path(output_dir).iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    first = tmp_path / Path(report.shards[0]).name
    first.rename(tmp_path / "flowers00-16.tfrec")
    metadata = json.loads((tmp_path / sidecar.METADATA_FILE).read_text())
    for key in ("shards", "shard_bytes"):
        metadata[key]["flowers00-16.tfrec"] = metadata[key].pop(first.name)
    (tmp_path / sidecar.METADATA_FILE).write_text(json.dumps(metadata))
    result = validation.validate(str(tmp_path), verbose=False)
    assert "flowers00-16.tfrec: its name says 16 records; it holds 15." in result.problems


def test_validate_finds_lost_images_and_bad_records(converted, tmp_path):
    output_dir, report = converted
    for path in Path(output_dir).iterdir():
        (tmp_path / path.name).write_bytes(path.read_bytes())
    metadata = json.loads((tmp_path / sidecar.METADATA_FILE).read_text())
    metadata["num_input_images"] = 61
    (tmp_path / sidecar.METADATA_FILE).write_text(json.dumps(metadata))
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


def test_validation_table_keeps_whole_class_names_that_share_a_start():
    names = ["sunflowers_red", "sunflowers_yellow", "daisy"]
    counts = {"sunflowers_red": 1, "sunflowers_yellow": 2, "daisy": 3}
    shard = validation.ShardReport("flowers00-6.tfrec", 6, 6, counts)
    report = validation.ValidationReport("/shards", [shard], names, 6, [], [])
    assert report.summary().splitlines()[:3] == [
        "shard              records  sunflowers_red  sunflowers_yellow       daisy",
        "-------------------------------------------------------------------------",
        "flowers00-6.tfrec        6               1                  2           3",
    ]
