"""The sidecar JSON beside a set of shards, read: its name, and what the conversion wrote.

Written last, next to the shards (`METADATA_FILE`): while it is missing, the set is not
finished. It lists the shards with their record counts and sizes, and says what was
converted. Writing it is the conversion's (`utils.lab.shard_metadata`).
"""

from __future__ import annotations

import json

import tensorflow as tf

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
