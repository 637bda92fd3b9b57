"""Shard files on disk: their names, writing and finding them, checked against their sidecar.

A shard is named with its index and its record count, `flowers00-230.tfrec` (Beam's
`-00000-of-00016` names are found too). It is written under a temporary name and renamed
when complete. The sidecar (`sidecar`) lists a finished set. A conversion writes its
set in `INCOMPLETE_FOLDER` first, then moves it in (`output_folder`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import tensorflow as tf

from utils import errors, sidecar

SHARD_PREFIX = "flowers"
SHARD_SUFFIX = ".tfrec"
TEMPORARY_SUFFIX = ".tmp"
INCOMPLETE_FOLDER = "flowers_tfrecords.incomplete"

_COURSE_SHARD = re.compile(rf"^{SHARD_PREFIX}(\d+)-(\d+){re.escape(SHARD_SUFFIX)}$")
_BEAM_SHARD = re.compile(r"^.+-(\d{5})-of-(\d{5})(\.tfrec|\.tfrecord)?$")


def shard_name(index: int, num_records: int) -> str:
    """Returns the file name of a finished shard.

    Args:
        index: the shard's index.
        num_records: the records it holds.

    Returns:
        The name, e.g. `flowers00-230.tfrec` for shard 0 holding 230 records.
    """
    return f"{SHARD_PREFIX}{index:02d}-{num_records}{SHARD_SUFFIX}"


def temporary_path(output_dir: str, index: int) -> str:
    """Returns where a shard is written before it is complete.

    Args:
        output_dir: the shards' folder.
        index: the shard's index.

    Returns:
        The path, e.g. `<output_dir>/flowers00.tfrec.tmp`.
    """
    return f"{output_dir}/{SHARD_PREFIX}{index:02d}{SHARD_SUFFIX}{TEMPORARY_SUFFIX}"


# Generated from notebooks/02_write_tfrecords.py (TODO 2) by tools/building/saved.py.
def write_shard(serialized_examples, output_dir, index):
    """Writes the records to shard `index` in `output_dir`; returns the shard's path."""
    temporary = temporary_path(output_dir, index)
    num_records = 0
    with tf.io.TFRecordWriter(temporary) as writer:
        for record in serialized_examples:
            writer.write(record)
            num_records += 1
    final_path = f"{output_dir}/{shard_name(index, num_records)}"
    tf.io.gfile.rename(temporary, final_path, overwrite=True)
    return final_path


def shard_record_count(path: str) -> int | None:
    """Returns the record count written in a course shard's name.

    Args:
        path: a shard's path or name.

    Returns:
        The count, e.g. 230 for `flowers00-230.tfrec`; None for any other name (Beam's).
    """
    match = _COURSE_SHARD.match(Path(path).name)
    return int(match.group(2)) if match else None


def find_shards(output_dir: str) -> list[str]:
    """Returns the shard files in a folder, by their names alone (no sidecar is read).

    Args:
        output_dir: a local or `gs://` folder.

    Returns:
        The paths of the files named like a course shard (`flowers00-230.tfrec`) or a
        Beam shard (`...-00000-of-00016`), sorted; [] when the folder does not exist.
    """
    if not tf.io.gfile.isdir(output_dir):
        return []
    names = tf.io.gfile.listdir(output_dir)
    return sorted(
        f"{output_dir}/{name}"
        for name in names
        if _COURSE_SHARD.match(name) or _BEAM_SHARD.match(name)
    )


def list_folder(folder: str) -> list[str]:
    """Returns the names of the entries in a folder.

    Args:
        folder: a local or `gs://` folder.

    Returns:
        The names, in the order listed; [] when `folder` is not a folder.
    """
    return tf.io.gfile.listdir(folder) if tf.io.gfile.isdir(folder) else []


def list_shards(output_dir: str, metadata: dict | None = None) -> list[str]:
    """Returns the paths of the shards the sidecar lists, after checking they are all there.

    Args:
        output_dir: the shards' folder.
        metadata: its sidecar, if already read.

    Returns:
        The shard paths, sorted.

    Raises:
        FileNotFoundError: if there is no sidecar.
        ValueError: naming each shard that is listed but missing, of another size than
            written, or course-named but not listed (an extra shard).

    Example:
        shard_paths = shard_files.list_shards("/tmp/flowers-tfrec")
    """
    output_dir = str(output_dir).rstrip("/")
    metadata = metadata or sidecar.read_metadata(output_dir)
    problems = shard_set_problems(output_dir, metadata)
    if problems:
        raise ValueError(
            f"The shards in {output_dir} do not match their sidecar "
            f"{sidecar.METADATA_FILE}: "
            + "; ".join(problems)
            + ". Write them again: run lab 2, or conversion.convert()."
        )
    return [f"{output_dir}/{name}" for name in sorted(metadata["shards"])]


def shard_set_problems(output_dir: str, metadata: dict) -> list[str]:
    """Compares the shard files in a folder with its sidecar.

    Args:
        output_dir: the shards' folder.
        metadata: its sidecar.

    Returns:
        One line per problem, naming the shard: listed but missing, of another size than
        written, or course-named but not listed; [] when the set matches.
    """
    names = set(list_folder(output_dir))
    listed = metadata.get("shards", {})
    sizes = metadata.get("shard_bytes", {})
    problems = [
        f"{name}: listed in the sidecar, but missing"
        for name in sorted(listed)
        if name not in names
    ]
    for name in sorted(set(listed) & names & set(sizes)):
        size = tf.io.gfile.stat(f"{output_dir}/{name}").length
        if size != sizes[name]:
            problems.append(
                f"{name}: {size:,} bytes, but {sizes[name]:,} were written: truncated or changed"
            )
    extra = [n for n in sorted(names) if _COURSE_SHARD.match(n) and n not in listed]
    problems += [f"{name}: a shard not listed in the sidecar (an extra shard)" for name in extra]
    return problems


def expected_record_counts(paths: Sequence[str]) -> list[int | None]:
    """Returns how many records each shard should hold.

    Args:
        paths: shard paths.

    Returns:
        One count per path: from the shard's name, else from the sidecar in its folder,
        else None (unknown).
    """
    sidecars = {}
    counts = []
    for path in paths:
        count = shard_record_count(path)
        if count is None:
            folder, name = str(path).rsplit("/", 1) if "/" in str(path) else (".", str(path))
            if folder not in sidecars:
                found = sidecar.read_json(f"{folder}/{sidecar.METADATA_FILE}")
                sidecars[folder] = found or {}
            count = sidecars[folder].get("shards", {}).get(name)
        counts.append(count)
    return counts


def find_damaged_shards(paths: Sequence[str]) -> list[str]:
    """Reads each shard to its end; returns `"<path>: <error>"` for each that does not read.

    A shard whose record count differs from its name's (or its sidecar's) counts too.

    Args:
        paths: shard paths.

    Returns:
        One line per damaged shard: its path, then the error or the counts; [] when
        every shard reads to its end with the records expected.

    Example:
        print(shard_files.find_damaged_shards(shard_paths))  # [] when every shard reads
    """
    damaged = []
    for path, expected in zip(paths, expected_record_counts(paths), strict=True):
        count = 0
        try:
            for _ in tf.data.TFRecordDataset(path):
                count += 1
        except tf.errors.OpError as error:
            damaged.append(f"{path}: record {count}: {errors.error_message(error)}")
            continue
        if expected is not None and count != expected:
            damaged.append(f"{path}: {count} records; {expected} were written")
    return damaged
