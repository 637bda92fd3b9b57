"""Tests of utils/shard_files.py: shard names, finding shards, the sidecar."""

from pathlib import Path

from utils import records, shard_files, sidecar


def test_shard_names_carry_index_and_count():
    assert shard_files.shard_name(0, 230) == "flowers00-230.tfrec"
    assert shard_files.shard_name(12, 7) == "flowers12-7.tfrec"
    assert shard_files.shard_record_count("gs://b/x/flowers12-7.tfrec") == 7
    assert shard_files.shard_record_count("/x/flowers-00003-of-00016.tfrecord") is None


def test_find_shards_knows_course_and_beam_names_only(tmp_path):
    for name in [
        "flowers00-3.tfrec",
        "flowers-00000-of-00002.tfrecord",
        "flowers01.tfrec.tmp",
        "notes.txt",
        sidecar.METADATA_FILE,
    ]:
        (tmp_path / name).write_bytes(b"")
    found = [Path(p).name for p in shard_files.find_shards(str(tmp_path))]
    assert found == ["flowers-00000-of-00002.tfrecord", "flowers00-3.tfrec"]
    assert shard_files.find_shards(str(tmp_path / "missing")) == []


def test_sidecar_describes_the_set(converted, small_source):
    output_dir, report = converted
    metadata = sidecar.read_metadata(str(output_dir))
    assert metadata["class_names"] == list(small_source.class_names)
    assert metadata["target_size"] == 64 and metadata["num_records"] == 60
    assert metadata["shards"] == {Path(p).name: 15 for p in report.shards}
    assert set(metadata["schema"]) == set(records.FEATURES)
