"""What lab 2 prints about what it wrote: one record, the shards read back, the summary."""

from __future__ import annotations

import tensorflow as tf

from utils import display
from utils.lab import conversion_report, validation
from utils.lessons.write_tfrecords import recompression

# A list of more values than this is described, not printed (a one-hot of 100 classes).
_MAX_VALUES_SHOWN = 8


def describe_example(example: tf.train.Example) -> str:
    """Describes a `tf.train.Example` one feature a line: its name, kind and values.

    Args:
        example: the record, e.g. lab 2's `to_example(...)`.

    Returns:
        A line per feature, by name (bytes over 40 long counted, not printed; a long
        one-hot said by where its 1.0 is), then the serialized size.

    Example:
        print(report.describe_example(to_example(jpeg, 0, [300, 400], class_names)))
    """
    lines = []
    for name, feature in sorted(example.features.feature.items()):
        kind = feature.WhichOneof("kind")
        values = list(getattr(feature, kind).value) if kind else []
        if kind == "bytes_list" and any(len(value) > 40 for value in values):
            shown = ", ".join(f"{len(value):,} bytes" for value in values)
        elif len(values) > _MAX_VALUES_SHOWN and 1.0 in values:
            shown = f"{len(values):,} floats, 1.0 at index {values.index(1.0)}"
        else:
            shown = str(values)
        lines.append(f"{name:>14}  {kind or 'empty':<10}  {shown}")
    return "\n".join([*lines, f"Serialized: {example.ByteSize():,} bytes."])


def describe_shards(report: validation.ValidationReport) -> str:
    """Describes a validated set of shards in a few lines, not a row a shard.

    Args:
        report: what `validation.validate` found.

    Returns:
        The shards' count, records and megabytes (fewest-most), the classes the shards
        lack, the input images accounted for, and "Valid: ..." or each problem.

    Example:
        print(report.describe_shards(validation.validate(output_dir, verbose=False)))
    """
    counts = [shard.num_records for shard in report.shards] or [0]
    megabytes = [
        tf.io.gfile.stat(f"{report.output_dir}/{shard.name}").length / 1e6
        for shard in report.shards
    ] or [0.0]
    lacking = [
        shard.name
        for shard in report.shards
        if any(not shard.class_counts.get(name) for name in report.class_names)
    ]
    classes = (
        "every class in every shard."
        if not lacking
        else f"{len(lacking)} shard(s) lack a class: {display.short_list(lacking)}."
    )
    return (
        f"{len(report.shards)} shards of {_span(counts, ',')} records, "
        f"{_span(megabytes, '.2f')} MB each; {classes}\n{report.accounting()}"
    )


def _span(values: list, number_format: str) -> str:
    """'229-230', or '230' when the fewest and the most are the same, formatted alike."""
    low, high = format(min(values), number_format), format(max(values), number_format)
    return low if low == high else f"{low}-{high}"


def describe_lab(
    measured: recompression.RecompressionResult,
    converted: conversion_report.ConversionReport,
    validated: validation.ValidationReport,
) -> str:
    """Says in three lines what lab 2 measured, wrote and read back.

    Args:
        measured: what `recompression.measure_recompression` found on its sample.
        converted: what `conversion.convert` wrote.
        validated: what `validation.validate` read back.

    Returns:
        The bytes saved and the PSNR, the decode verdict, the conversion and validation.

    Example:
        print(report.describe_lab(measured, converted, validated))
    """
    before, after = measured.original_bytes, measured.resized_bytes
    return (
        f"Sample of {measured.num_images}: {before:,.0f} -> {after:,.0f} bytes per image "
        f"({display.describe_saving(before, after)}) at quality {measured.quality}, "
        f"PSNR {measured.psnr_db:.1f} dB.\n{measured.decode_verdict}\n"
        f"Wrote {converted.num_written} images into {len(converted.shards)} shards in "
        f"{converted.seconds:.1f} s; read back: {'valid' if validated.ok else 'INVALID'}, "
        f"{validated.num_input_images} input images = {validated.num_records} written + "
        f"{len(validated.skipped)} skipped."
    )
