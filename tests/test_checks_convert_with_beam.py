"""utils/checks/convert_with_beam.py (lesson 6): right answers pass, mistakes name the TODO.

Skipped, with the reason, without Apache Beam.
"""

import json

import pytest

from utils import readable_images, records
from utils.lab import data

pytest.importorskip(
    "apache_beam", reason="Apache Beam is not installed: pip install -r requirements-beam.txt"
)
from utils.lessons.convert_with_beam import beam_conversion  # noqa: E402


# The checks of lesson 6, TODO 1: right answers pass, usual mistakes say what is wrong.
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


def _build_without(step):
    """A learner's build_conversion that leaves out one step of the solution's."""
    from apache_beam.io import fileio

    def build(pipeline, source, output_dir, num_shards):
        import apache_beam as beam

        pattern = source.pattern if step == "escape" else source.match_pattern
        paths = pipeline | fileio.MatchFiles(pattern) | beam.Map(lambda match: match.path)
        if step != "filter":
            paths = paths | beam.Filter(readable_images.is_image_file)
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
        (
            "escape",
            r"the pipeline read no file of .*photos \[check\].*"
            r"Match `source\.match_pattern`",
        ),
        (
            "filter",
            r"notes\.txt went to the conversion: keep only the images with "
            r"beam\.Filter\(readable_images\.is_image_file\)\.$",
        ),
    ],
    ids=["unescaped glob", "no filter"],
)
def test_check_build_conversion_catches_an_unescaped_glob_and_a_missing_filter(step, message):
    from utils import checks

    with pytest.raises(checks.CheckFailed, match=message):
        checks.check_build_conversion(_build_without(step), todo=2)
