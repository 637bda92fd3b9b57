"""Tests of the Beam conversion (lesson 5): skipped, with the reason, without Apache Beam."""

import hashlib
import json

import pytest
import tensorflow as tf

from utils import conversion, data, records, shard_files, sources, validation

pytest.importorskip(
    "apache_beam", reason="Apache Beam is not installed: pip install -r requirements-beam.txt"
)
from tools import convert_beam  # noqa: E402
from utils import beam_conversion  # noqa: E402


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
    shard_set = conversion.ensure_shards(
        source, str(tmp_path), target_size=48, num_shards=2, jpeg_quality=80
    )
    assert capsys.readouterr().out == f"Found 2 shards in {tmp_path}.\n"
    assert shard_set.num_records == 60


def test_bad_images_go_to_the_skipped_list_not_away(tmp_path):
    root = data.make_damaged_dataset(tmp_path / "images", images_per_class=1)
    damaged = sources.resolve_source(str(root))
    run = beam_conversion.convert_with_beam(
        damaged, tmp_path / "out", target_size=32, num_shards=2, verbose=False
    )
    skipped = {image.path.rsplit("/", 2)[-2] + "/" + image.path.rsplit("/", 1)[-1]
               for image in run.report.skipped}  # fmt: skip
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
        ["--num-images", "60", "--output-dir", str(tmp_path), "--num-shards", "2",
         "--target-size", "32"]
    )  # fmt: skip
    assert status == 0
    assert "Input images: 60 = 60 written + 0 skipped." in capsys.readouterr().out


# The checks of lesson 5, TODO 1: right answers pass, usual mistakes say what is wrong.
def _dofn(process):
    import apache_beam as beam

    return type("ConvertImage", (beam.DoFn,), {"process": process})


def _convert(path, class_names=data.CLASSES):
    return beam_conversion.convert_image(path, class_names=class_names, target_size=32, quality=90)


def _skipped(value):
    import apache_beam as beam

    return beam.pvalue.TaggedOutput("skipped", value)


def _yielding(skipped_value=lambda path, error: json.dumps({"path": path, "error": error})):
    def process(self, path):
        record, error = _convert(path)
        if record is None:
            yield _skipped(skipped_value(path, error))
        else:
            yield record

    return _dofn(process)


def _check_dofn(dofn_class, class_names=data.CLASSES):
    from utils import checks

    checks.check_convert_dofn(dofn_class, todo=1, class_names=class_names)


def test_check_convert_dofn_passes_with_yield_or_a_returned_list(capsys):
    _check_dofn(_yielding())

    def returns_a_list(self, path):  # Beam iterates over a list: right too.
        record, error = _convert(path)
        return [record] if record else [_skipped(json.dumps({"path": path, "error": error}))]

    _check_dofn(_dofn(returns_a_list))
    assert capsys.readouterr().out == 2 * (
        "TODO 1 passed: a record for each readable image, a 'skipped' entry for an "
        "unreadable one.\n"
    )


def test_check_convert_dofn_uses_the_learners_class_names(capsys):
    class_names = ["cats", "people [2024]"]

    def process(self, path):  # Knows only the learner's classes, as the notebook's does.
        record, error = _convert(path, class_names)
        yield record if record else _skipped(json.dumps({"path": path, "error": error}))

    _check_dofn(_dofn(process), class_names)
    assert capsys.readouterr().out.startswith("TODO 1 passed")


def test_check_convert_dofn_return_instead_of_yield_says_so():
    from utils import checks

    def returns(self, path):
        record, error = _convert(path)
        if record is None:
            return _skipped(json.dumps({"path": path, "error": error}))
        return record

    with pytest.raises(
        checks.CheckFailed,
        match=r"^TODO 1 \(ConvertImage.process\): expected process\(\) to yield its output; for "
        r"a readable JPEG \(daisy/photo.jpg\) it returns a bytes of [\d,]+\. Beam iterates over "
        r"what process\(\) returns, so a record returned gives one output per byte\. Use "
        r"`yield`, not `return`\.$",
    ):
        _check_dofn(_dofn(returns))


def test_check_convert_dofn_skipped_entry_must_be_json_of_path_and_error():
    from utils import checks

    with pytest.raises(
        checks.CheckFailed,
        match=r"expected the skipped entry for an empty file \(daisy/empty.jpg\) to be "
        r"json.dumps\(\{'path': path, 'error': error\}\); found '.*empty.jpg: .*'\. Each line",
    ):
        _check_dofn(_yielding(lambda path, error: f"{path}: {error}"))
    with pytest.raises(
        checks.CheckFailed, match=r"to be a string, json.dumps\(...\) .*found a dict"
    ):
        _check_dofn(_yielding(lambda path, error: {"path": path, "error": error}))
    with pytest.raises(checks.CheckFailed, match=r"found '\{\"path\": .*\"error\": \"\"\}'"):
        _check_dofn(_yielding(lambda path, error: json.dumps({"path": path, "error": ""})))


def test_check_convert_dofn_stub_and_two_outputs():
    from utils import checks

    def stub(self, path):
        pass

    with pytest.raises(checks.CheckFailed, match=r"^TODO 1 \(ConvertImage.process\): not done yet"):
        _check_dofn(_dofn(stub))

    def both(self, path):
        record, error = _convert(path)
        yield record
        yield _skipped(json.dumps({"path": path, "error": error}))

    with pytest.raises(
        checks.CheckFailed,
        match=r"expected one output for a readable JPEG \(daisy/photo.jpg\); found 2: bytes, "
        r"TaggedOutput\.$",
    ):
        _check_dofn(_dofn(both))


def test_check_build_conversion_uses_the_learners_class_names(capsys):
    import types

    from utils import checks

    class_names = ["cats", "people"]

    def build(pipeline, source, output_dir, num_shards):  # The DoFn knows these classes only.
        learners = types.SimpleNamespace(
            match_pattern=source.match_pattern, class_names=class_names
        )
        beam_conversion.build_pipeline(
            pipeline,
            learners,
            output_dir,
            num_shards,
            target_size=records.DEFAULT_TARGET_SIZE,
            quality=records.DEFAULT_JPEG_QUALITY,
        )

    checks.check_build_conversion(build, todo=2, class_names=class_names)
    assert capsys.readouterr().out == (
        "TODO 2 passed: 11 images = 8 records in 2 shards + 3 skipped.\n"
    )


def test_beam_converts_a_real_folder_with_brackets_and_notes(real_photo_folder, tmp_path):
    """`photos [2024]/`: its `[` is not a glob's, and its notes and .webp files are not read."""
    source = sources.resolve_source(str(real_photo_folder["root"]))
    beam_conversion.convert_with_beam(source, str(tmp_path / "out"), num_shards=2, verbose=False)
    report = validation.validate(str(tmp_path / "out"), verbose=False)
    assert report.ok, report.problems
    assert (report.num_input_images, report.num_records) == (39, 36)
    assert sorted(path for path, _ in report.skipped) == real_photo_folder["unreadable"]


def _build_without(step):
    """A learner's build_conversion that leaves out one step of the solution's."""
    from apache_beam.io import fileio

    def build(pipeline, source, output_dir, num_shards):
        import apache_beam as beam

        pattern = source.pattern if step == "escape" else source.match_pattern
        paths = pipeline | fileio.MatchFiles(pattern) | beam.Map(lambda match: match.path)
        if step != "filter":
            paths = paths | beam.Filter(sources.is_image_file)
        dofn = beam_conversion.make_convert_dofn(source.class_names, 64, 90)
        converted = paths | beam.ParDo(dofn).with_outputs("skipped", main="records")
        converted.records | beam.io.WriteToTFRecord(
            f"{output_dir}/flowers", file_name_suffix=".tfrec", num_shards=num_shards
        )
        converted.skipped | beam.io.WriteToText(
            f"{output_dir}/{beam_conversion.SKIPPED_FILE}", shard_name_template=""
        )

    return build


@pytest.mark.parametrize(
    "step, message",
    [
        ("escape", r"the pipeline read no file of .*photos \[check\].*"
                   r"Match `source\.match_pattern`"),
        ("filter", r"notes\.txt went to the conversion: keep only the images with "
                   r"beam\.Filter\(sources\.is_image_file\)\.$"),
    ],
    ids=["unescaped glob", "no filter"],
)  # fmt: skip
def test_check_build_conversion_catches_an_unescaped_glob_and_a_missing_filter(step, message):
    from utils import checks

    with pytest.raises(checks.CheckFailed, match=message):
        checks.check_build_conversion(_build_without(step), todo=2)
