"""Checks for lesson 5: the conversion as a Beam DoFn and as a Beam pipeline."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

import tensorflow as tf

from utils import data, sources, tfrecords, validation
from utils.checks._base import CHECK_ERRORS, _fail, _first_line, _passed


def check_convert_dofn(dofn_class, *, todo: int, class_names: Sequence[str]):
    """Checks `dofn_class().process(path)`: one record for a readable image, one
    `TaggedOutput("skipped", ...)` naming the path and the error for an unreadable one.

    Example:
        checks.check_convert_dofn(ConvertImage, todo=1, class_names=source.class_names)
    """
    __tracebackhide__ = True
    import apache_beam as beam

    name = "ConvertImage.process"
    expected = "one serialized record per readable image, a 'skipped' TaggedOutput otherwise"
    with tempfile.TemporaryDirectory() as folder:
        root = data.make_damaged_dataset(Path(folder) / "images", images_per_class=1)
        for relative in ["daisy/daisy_0000.jpg", "dandelion/grayscale.jpg", "daisy/empty.jpg"]:
            path = str(root / relative)
            try:
                outputs = dofn_class().process(path)
                outputs = [] if outputs is None else list(outputs)
            except CHECK_ERRORS as error:
                _fail(todo, name, f"expected {expected}; found an error: {_first_line(error)}")
            if not outputs:
                _fail(todo, name, f"not done yet: it yields nothing for {relative}. Expected "
                                  f"{expected}.")  # fmt: skip
            if len(outputs) != 1:
                _fail(todo, name, f"expected one output for {relative}; found {len(outputs)}.")
            output = outputs[0]
            if relative.endswith("empty.jpg"):
                if not isinstance(output, beam.pvalue.TaggedOutput) or output.tag != "skipped":
                    _fail(todo, name, f"expected TaggedOutput('skipped', ...) for the unreadable "
                                      f"{relative}; found {output!r:.80}.")  # fmt: skip
                entry = json.loads(output.value)
                if entry.get("path") != path or not entry.get("error"):
                    _fail(todo, name, f"expected the skipped entry to name the path and the "
                                      f"error; found {entry}.")  # fmt: skip
                continue
            if not isinstance(output, bytes):
                _fail(todo, name, f"expected the record's bytes for {relative}; found "
                                  f"{type(output).__name__}.")  # fmt: skip
            record = tfrecords.parse_record(tf.constant(output))
            if record["label"].numpy().decode() != relative.split("/")[0]:
                _fail(todo, name, f"expected label {relative.split('/')[0]} for {relative}.")
    _passed(todo, "a record for each readable image, a 'skipped' entry for an unreadable one.")


def check_build_conversion(build_conversion, *, todo: int):
    """Runs `build_conversion` on a small folder with bad files, on Beam's DirectRunner,
    and validates its output like lab 2's.

    Example:
        checks.check_build_conversion(build_conversion, todo=2)
    """
    __tracebackhide__ = True
    from utils import beam_conversion

    name = "build_conversion"
    with tempfile.TemporaryDirectory() as folder:
        root = data.make_damaged_dataset(Path(folder) / "images", images_per_class=1)
        source = sources.resolve_source(str(root))
        output_dir = str(Path(folder) / "shards")
        try:
            beam_conversion.convert_with_beam(
                source, output_dir, num_shards=2, build=build_conversion, verbose=False
            )
        except (*CHECK_ERRORS, RuntimeError) as error:
            _fail(todo, name, f"running the pipeline fails: {_first_line(error)}")
        shards = [Path(path).name for path in tfrecords.find_shards(output_dir)]
        if not shards:
            _fail(todo, name, "not done yet: the pipeline wrote no shards. Expected 2, named "
                              "flowers-0000N-of-00002.tfrec.")  # fmt: skip
        wanted = ["flowers-00000-of-00002.tfrec", "flowers-00001-of-00002.tfrec"]
        if shards != wanted:
            _fail(todo, name, f"expected shards {wanted}; found {shards}.")
        report = validation.validate(output_dir, verbose=False)
        if len(report.skipped) != 3:
            _fail(todo, name, f"expected the 3 unreadable files in the skipped list; found "
                              f"{len(report.skipped)}. Write converted.skipped with WriteToText "
                              f"to {beam_conversion.SKIPPED_FILE}.")  # fmt: skip
        if not report.ok:
            _fail(todo, name, f"the output does not validate: {report.problems[0]}")
    _passed(todo, f"{report.num_input_images} images = {report.num_records} records in 2 "
                  f"shards + {len(report.skipped)} skipped.")  # fmt: skip
