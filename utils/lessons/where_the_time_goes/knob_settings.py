"""The settings lesson 8 times for each knob: the course pipeline's own setting first.

The cache's rows read only the shards whose decoded images fit in memory (`cache_sample`).
"""

from __future__ import annotations

import tensorflow as tf

from utils import shard_files

# The knobs switched both ways, each with the course pipeline's own setting first.
SWITCHES = [("deterministic", False), ("prefetch", True), ("cache", False)]

# The cache keeps every decoded image it has seen in memory: a 20,000-photo folder at
# 192 px would hold 2.2 GB. Above this many bytes, both cache rows read only the first
# shards that fit, and their labels say so.
CACHE_MAX_BYTES = 512 * 1024**2


def cache_sample(
    shard_paths: list[str], *, num_records: int, target_size: int
) -> tuple[list[str], int]:
    """Returns the shards the cache rows read, and their records: all that fit in `CACHE_MAX_BYTES`.

    Args:
        shard_paths: the course's shards, named with their record counts.
        num_records: records in all of them.
        target_size: side of the stored images.

    Returns:
        (paths, records): every shard when the decoded set fits, else the first shards
        that fit (at least one).
    """
    per_record = target_size * target_size * 3
    if num_records * per_record <= CACHE_MAX_BYTES:
        return list(shard_paths), num_records
    paths, total = [], 0
    for path in shard_paths:
        count = shard_files.shard_record_count(path) or 0
        if paths and (total + count) * per_record > CACHE_MAX_BYTES:
            break
        paths.append(path)
        total += count
    return paths, total


def settings_by_knob(
    shard_paths: list[str],
    *,
    paths_by_count: dict[int, list[str]],
    parallel_reads: list[int],
    num_records: int,
    target_size: int,
) -> dict[str, dict[str, dict]]:
    """Returns each knob's settings: {knob: {label: what that row changes}}.

    A row changes settings of `pipeline.tfrecord_images`, and may read other shards:
    `paths` (the shard counts, the cache's sample) and `records_per_pass` (the cache's).

    Args:
        shard_paths: the course's shards.
        paths_by_count: {shard count: the same records in that many shards}.
        parallel_reads: the settings of `num_parallel_reads` (`tf.data.AUTOTUNE` is
            labelled "AUTOTUNE").
        num_records: records in `shard_paths`.
        target_size: side of the stored images.

    Returns:
        The knobs in the order they are timed, each setting labelled.
    """
    settings = {
        "num_parallel_reads": {
            "AUTOTUNE" if reads == tf.data.AUTOTUNE else str(reads): {"num_parallel_reads": reads}
            for reads in parallel_reads
        },
        "shards": {str(len(paths)): {"paths": paths} for paths in paths_by_count.values()},
        "repeat": {"before the reads": {"epochs": None}, "after the pipeline": {"epochs": 1}},
    }
    cache_paths, cache_records = cache_sample(
        shard_paths, num_records=num_records, target_size=target_size
    )
    for knob, course_value in SWITCHES:
        settings[knob] = {}
        for value in (course_value, not course_value):
            label, values = str(value).lower(), {knob: value}
            if knob == "cache" and len(cache_paths) < len(shard_paths):
                label += f" ({len(cache_paths)} of {len(shard_paths)} shards)"
                values.update(paths=cache_paths, records_per_pass=cache_records)
            settings[knob][label] = values
    return settings
