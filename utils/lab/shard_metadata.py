"""The sidecar JSON beside a set of shards: what the conversion wrote, the set's end mark.

Written last, next to the shards (`METADATA_FILE`): while it is missing, the set is not
finished. It lists the shards with their record counts and sizes, and says what was converted.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

import tensorflow as tf

from utils import records
from utils.lab.conversion_report import ConversionReport

if TYPE_CHECKING:
    from utils.lab.sources import ImageSource

METADATA_FILE = "flowers_tfrecords.json"


def read_json(path: str) -> dict | None:
    """Reads a course JSON file (a sidecar), tolerating anything else there.

    Args:
        path: the file's path.

    Returns:
        The file's JSON object; None when the file is missing, not JSON, or not an object.
    """
    if not tf.io.gfile.exists(path):
        return None
    try:
        with tf.io.gfile.GFile(path) as file:
            content = json.load(file)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return content if isinstance(content, dict) else None


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


def read_metadata(output_dir: str) -> dict:
    """Returns the sidecar JSON of a finished set of shards.

    Args:
        output_dir: the shards' folder.

    Returns:
        The sidecar's object, as `write_metadata` wrote it.

    Raises:
        FileNotFoundError: if `output_dir` has no sidecar (the set was never finished).
    """
    path = f"{str(output_dir).rstrip('/')}/{METADATA_FILE}"
    if not tf.io.gfile.exists(path):
        raise FileNotFoundError(
            f"No {METADATA_FILE} in {output_dir}: the shards there are missing or unfinished. "
            "Run lab 2, or shard_cache.ensure_shards(), to write them."
        )
    with tf.io.gfile.GFile(path) as file:
        return json.load(file)
