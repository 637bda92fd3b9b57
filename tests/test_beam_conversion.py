"""Tests of the Beam conversion (lesson 6): skipped, with the reason, without Apache Beam."""

import hashlib

import pytest
import tensorflow as tf

from utils import records, shard_files
from utils.lab import conversion, data, shard_cache, sources, validation

pytest.importorskip(
    "apache_beam", reason="Apache Beam is not installed: pip install -r requirements-beam.txt"
)
from tools import convert_beam  # noqa: E402
from utils.lessons.convert_with_beam import beam_conversion  # noqa: E402


def _image_set(folder):
    parsed = tf.data.TFRecordDataset(shard_files.find_shards(str(folder))).map(records.parse_record)
    return {
        (r["label"].decode(), hashlib.sha256(r["image"]).hexdigest(), tuple(r["size"]))
        for r in parsed.as_numpy_iterator()
    }


@pytest.fixture(scope="module")
def source(small_flowers):
    return sources.resolve_source(str(small_flowers))


def test_beam_and_lab_2_write_the_same_images(source, tmp_path):
    run = beam_conversion.convert_with_beam(
        source, tmp_path / "beam", target_size=48, num_shards=3, verbose=False
    )
    conversion.convert(source, tmp_path / "loop", target_size=48, num_shards=4)
    beam_images = _image_set(tmp_path / "beam")
    assert len(beam_images) == 60 and beam_images == _image_set(tmp_path / "loop")
    names = [path.rsplit("/", 1)[-1] for path in run.report.shards]
    assert names == [f"flowers-0000{i}-of-00003.tfrec" for i in range(3)]
    assert sum(run.report.shard_counts) == 60 and run.pipeline_seconds > 0


def test_beam_output_validates_and_labs_3_and_4_find_it(source, tmp_path, capsys):
    beam_conversion.convert_with_beam(
        source, tmp_path, target_size=48, num_shards=2, jpeg_quality=80, verbose=False
    )
    assert validation.validate(str(tmp_path), verbose=False).ok
    capsys.readouterr()
    shard_set = shard_cache.ensure_shards(
        source, str(tmp_path), target_size=48, num_shards=2, jpeg_quality=80
    )
    assert capsys.readouterr().out == f"Found 2 shards in {tmp_path}.\n"
    assert shard_set.num_records == 60


def test_bad_images_go_to_the_skipped_list_not_away(tmp_path, capfd):
    root = data.make_damaged_dataset(tmp_path / "images", images_per_class=1)
    damaged = sources.resolve_source(str(root))
    run = beam_conversion.convert_with_beam(
        damaged, tmp_path / "out", target_size=32, num_shards=2, verbose=True
    )
    printed = capfd.readouterr()
    assert "jpeg_mem.cc" not in printed.err
    assert printed.out.count("TensorFlow's decoder logged, on the skipped files: Premature") == 1
    skipped = {
        image.path.rsplit("/", 2)[-2] + "/" + image.path.rsplit("/", 1)[-1]
        for image in run.report.skipped
    }
    unreadable = {name for name, why in data.DAMAGED_FILES.items() if why.startswith("unreadable")}
    assert skipped == unreadable
    report = validation.validate(str(tmp_path / "out"), verbose=False)
    assert report.ok and (report.num_records, len(report.skipped)) == (8, 3)
    assert report.num_input_images == 11
    assert not (tmp_path / "out" / beam_conversion.SKIPPED_FILE).exists()  # In the sidecar.


def test_convert_image_reports_the_error():
    record, error = beam_conversion.convert_image(
        "/no/such/daisy/file.jpg", class_names=data.CLASSES, target_size=32, quality=90
    )
    assert record is None and "No such file or directory" in error


def test_command_line_runs_locally_and_validates(tmp_path, capsys):
    status = convert_beam.main(
        [
            "--num-images",
            "60",
            "--output-dir",
            str(tmp_path),
            "--num-shards",
            "2",
            "--target-size",
            "32",
        ]
    )
    assert status == 0
    assert "Input images: 60 = 60 written + 0 skipped." in capsys.readouterr().out


def test_beam_converts_a_real_folder_with_brackets_and_notes(real_photo_folder, tmp_path):
    """`photos [2024]/`: its `[` is not a glob's, and its notes and .webp files are not read."""
    source = sources.resolve_source(str(real_photo_folder["root"]))
    beam_conversion.convert_with_beam(source, str(tmp_path / "out"), num_shards=2, verbose=False)
    report = validation.validate(str(tmp_path / "out"), verbose=False)
    assert report.ok, report.problems
    assert (report.num_input_images, report.num_records) == (39, 36)
    assert sorted(path for path, _ in report.skipped) == real_photo_folder["unreadable"]


def _top_level_steps(build, source, output_dir):
    """The top-level steps `build` adds: {label: (transform, labels of the steps feeding it)}."""
    import apache_beam as beam

    pipeline = beam.Pipeline()
    build(pipeline, source, str(output_dir), 2)
    return {
        step.full_label: (
            step.transform,
            [
                value.producer.full_label.split("/")[0]
                for value in step.main_inputs.values()
                if getattr(value, "producer", None) is not None
            ],
        )
        for step in pipeline.transforms_stack[0].parts
    }


def test_build_pipeline_reshuffles_right_after_matching(source, tmp_path):
    # MatchFiles is one match call; without a fusion break, a fusing runner (Dataflow)
    # would convert every image on the worker that matched them (issue 25).
    import apache_beam as beam

    def build(pipeline, source, output_dir, num_shards):
        beam_conversion.build_pipeline(
            pipeline, source, output_dir, num_shards, target_size=32, quality=90
        )

    steps = _top_level_steps(build, source, tmp_path)
    assert list(steps)[:5] == [
        "Match files",
        "Paths",
        "Images only",
        "Spread over workers",
        "Convert",
    ]
    reshuffle, reshuffle_inputs = steps["Spread over workers"]
    assert isinstance(reshuffle, beam.Reshuffle)
    assert reshuffle_inputs == ["Images only"]
    assert steps["Convert"][1] == ["Spread over workers"]
