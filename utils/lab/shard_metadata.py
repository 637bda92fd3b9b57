"""The sidecar JSON beside a set of shards, written: the conversion's record, the set's end mark.

Written last, next to the shards (`sidecar.METADATA_FILE`), under a temporary name and then
renamed; reading it is `utils.sidecar`'s.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

import tensorflow as tf

from utils import records
from utils.lab.conversion_report import ConversionReport
from utils.sidecar import METADATA_FILE

if TYPE_CHECKING:
    from utils.lab.sources import ImageSource


def write_json(path: str, content: dict) -> None:
    """Writes a JSON file safely: under a temporary name, renamed when complete.

    Args:
        path: the file's final path.
        content: the JSON object to write.
    """
    temporary = f"{path}.tmp"  # As a shard is written: renamed when complete.
    with tf.io.gfile.GFile(temporary, "w") as file:
        json.dump(content, file, indent=2)
    tf.io.gfile.rename(temporary, path, overwrite=True)


def write_metadata(
    output_dir: str,
    source: ImageSource,
    report: ConversionReport,
    target_size: int,
    jpeg_quality: int,
    *,
    fingerprint: str | None = None,
) -> None:
    """Writes the sidecar JSON of a finished set of shards (temporary name, then rename).

    It holds no time stamp: the same input and parameters give the same bytes.

    Args:
        output_dir: the shards' folder; the sidecar is `<output_dir>/METADATA_FILE`.
        source: the images converted (its name, pattern, class names, files not images).
        report: what the conversion wrote (shards, counts, skipped images).
        target_size: side of the square images, in pixels.
        jpeg_quality: JPEG quality of the recompressed images, 0-100.
        fingerprint: the hash of the input and parameters (`conversion.input_fingerprint`).
    """
    metadata = {
        "source": source.name,
        "source_pattern": source.pattern,
        "fingerprint": fingerprint,
        "class_names": list(source.class_names),
        "target_size": target_size,
        "jpeg_quality": jpeg_quality,
        "num_input_images": report.num_input_images,
        "num_records": report.num_written,
        "shards": {
            Path(p).name: n for p, n in zip(report.shards, report.shard_counts, strict=True)
        },
        "shard_bytes": {Path(p).name: tf.io.gfile.stat(p).length for p in report.shards},
        "skipped": [dataclasses.asdict(image) for image in report.skipped],
        "empty_class_folders": report.empty_class_folders,
        "not_images": list(getattr(source, "not_images", ())),
        "schema": records.SCHEMA,
    }
    write_json(f"{output_dir}/{METADATA_FILE}", metadata)
