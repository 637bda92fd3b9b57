"""Tests of utils/lessons/write_tfrecords/report.py: what lab 2 prints about what it wrote."""

import dataclasses

import tensorflow as tf

from utils import comparison, records
from utils.lab import data, validation
from utils.lessons.write_tfrecords import recompression, report


def test_describe_example_gives_a_line_a_feature_and_counts_long_bytes():
    jpeg = tf.io.encode_jpeg(tf.zeros((64, 64, 3), tf.uint8)).numpy()
    example = records.to_example(jpeg, 4, [300, 400], data.CLASSES)
    assert report.describe_example(example).splitlines() == [
        "         class  int64_list  [4]",
        f"         image  bytes_list  {len(jpeg):,} bytes",
        "         label  bytes_list  [b'tulips']",
        " one_hot_class  float_list  [0.0, 0.0, 0.0, 0.0, 1.0]",
        "          size  int64_list  [300, 400]",
        f"Serialized: {len(example.SerializeToString()):,} bytes.",
    ]


def test_describe_example_says_where_a_long_one_hot_is():
    names = [f"class{i}" for i in range(100)]
    example = records.to_example(b"x", 7, [3, 4], names)
    assert " one_hot_class  float_list  100 floats, 1.0 at index 7" in report.describe_example(
        example
    )


def test_describe_shards_on_a_valid_set(converted):
    output_dir, _ = converted
    validated = validation.validate(str(output_dir), verbose=False)
    megabytes = [tf.io.gfile.stat(f"{output_dir}/{s.name}").length / 1e6 for s in validated.shards]
    span = f"{min(megabytes):.2f}-{max(megabytes):.2f}".split("-")
    span = span[0] if span[0] == span[1] else "-".join(span)
    assert report.describe_shards(validated).splitlines() == [
        f"4 shards of 15 records, {span} MB each; every class in every shard.",
        "Input images: 60 = 60 written + 0 skipped.",
        "Valid: every record parses, every count matches.",
    ]


def test_describe_shards_names_the_shards_lacking_a_class_and_the_problems(converted):
    output_dir, _ = converted
    validated = validation.validate(str(output_dir), verbose=False)
    first = dataclasses.replace(validated.shards[0], class_counts={"daisy": 15})
    broken = dataclasses.replace(
        validated,
        shards=[first, *validated.shards[1:]],
        skipped=[("a/b.jpg", "not an image")],
        problems=["flowers00-15.tfrec: 1 record does not parse."],
    )
    lines = report.describe_shards(broken).splitlines()
    assert lines[0].endswith("; 1 shard(s) lack a class: flowers00-15.tfrec.")
    assert lines[1:] == [
        "Input images: 60 = 60 written + 1 skipped.",
        "  Skipped: 1 file(s), not an image: a/b.jpg",
        "INVALID: 1 problem(s):",
        "  flowers00-15.tfrec: 1 record does not parse.",
    ]
    # The table validate() prints ends with the same lines: one summary of what was accounted.
    assert broken.summary().splitlines()[-4:] == lines[1:]


def test_many_skipped_files_take_a_line_per_reason_in_either_summary(converted):
    output_dir, _ = converted
    validated = validation.validate(str(output_dir), verbose=False)
    skipped = [(f"daisy/{index:04}.jpg", "not an image") for index in range(2000)]
    many = dataclasses.replace(validated, skipped=skipped, num_input_images=2060)
    lines = report.describe_shards(many).splitlines()
    assert lines[1:] == [
        "Input images: 2060 = 60 written + 2000 skipped.",
        "  Skipped: 2,000 file(s), not an image: daisy/0000.jpg, daisy/0001.jpg, "
        "daisy/0002.jpg, ... (1,997 more)",
        "Valid: every record parses, every count matches.",
    ]
    assert many.summary().splitlines()[-3:] == lines[1:]


def test_describe_lab_says_the_bytes_the_verdict_and_the_counts(converted):
    output_dir, converted_report = converted
    validated = validation.validate(str(output_dir), verbose=False)
    runs = {"originals": comparison.RepeatedResult("originals", (1.0, 2.0))}
    measured = recompression.RecompressionResult(
        num_images=20,
        quality=90,
        original_bytes=40_000,
        same_size_bytes=38_000,
        resized_bytes=8_000,
        psnr_db=36.04,
        decode_runs=runs,
        decode_verdict="Decoding: the verdict.",
    )
    assert report.describe_lab(measured, converted_report, validated).splitlines() == [
        "Sample of 20: 40,000 -> 8,000 bytes per image (80% saved) at quality 90, PSNR 36.0 dB.",
        "Decoding: the verdict.",
        f"Wrote 60 images into 4 shards in {converted_report.seconds:.1f} s; read back: valid, "
        "60 input images = 60 written + 0 skipped.",
    ]
