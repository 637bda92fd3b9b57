"""Finding a source's set of TFRecord shards in the course cache, or writing it once.

Labs 3 and 4 call `ensure_shards` to find lab 2's shards or write them (`conversion.convert`);
`reshard` copies a set's records into another number of shards without decoding them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from pathlib import Path

import numpy as np
import tensorflow as tf

from utils import arguments, records, shard_files
from utils.lab import conversion, data, sources
from utils.lab.shard_metadata import write_json
from utils.sidecar import METADATA_FILE, read_json, read_metadata


def default_output_dir(source: sources.ImageSource, *, target_size: int, num_shards: int) -> str:
    """Returns the course cache folder for the shards of `source` at these settings.

    Args:
        source: the images the shards hold.
        target_size: side of the square images, in pixels.
        num_shards: number of shards.

    Returns:
        A folder under `data.default_cache_dir()`, named after the source and the settings.
    """
    key = hashlib.sha256(f"{source.pattern}|{source.num_images}".encode()).hexdigest()[:10]
    name = f"{source.name.strip('/').replace('/', '_')[-40:] or 'source'}-{key}"
    folder = data.default_cache_dir() / "tfrecords" / f"{name}-{target_size}px-{num_shards}shards"
    return str(folder)


@dataclasses.dataclass(frozen=True)
class ShardSet:
    """A finished, checked set of shards: what `ensure_shards` returns.

    Attributes:
        output_dir: the shards' folder, without a final "/".
        paths: the shard paths, sorted, each checked against the sidecar.
        class_names: the class names, in label order (the record's `class` indexes them).
        num_records: records in all shards.
        record_counts: records in each shard, by shard path.
        target_size: side of the square images, in pixels.
        jpeg_quality: JPEG quality of the recompressed images, 0-100.
        fingerprint: the hash of the input and parameters the set was written from.
    """

    output_dir: str
    paths: list[str]
    class_names: list[str]
    num_records: int
    record_counts: dict[str, int]
    target_size: int
    jpeg_quality: int
    fingerprint: str | None


def ensure_shards(
    source: sources.ImageSource,
    output_dir: str | Path | None = None,
    *,
    target_size: int = records.DEFAULT_TARGET_SIZE,
    num_shards: int = conversion.DEFAULT_NUM_SHARDS,
    jpeg_quality: int = records.DEFAULT_JPEG_QUALITY,
    seed: int = data.DEFAULT_SEED,
) -> ShardSet:
    """Returns `source`'s set of shards, writing the shards first if they are missing or stale.

    Shards count as present when the sidecar's fingerprint matches the input (paths,
    sizes and modification times of the images) and these parameters, and every shard it
    lists is there at the size written. Otherwise they are written again with `convert`.

    Args:
        source: the images to convert.
        output_dir: the shards' folder; by default the course cache's
            (`default_output_dir`).
        target_size: side of the square images, in pixels.
        num_shards: number of shards; fewer if there are fewer images.
        jpeg_quality: JPEG quality of the recompressed images, 0-100.
        seed: seed of the shuffle.

    Returns:
        A `ShardSet`: the checked shard paths, the class names and the counts.

    Raises:
        ValueError: if a parameter is out of range, or (from `convert`) `output_dir`
            cannot be written or no image could be read.

    Example:
        shard_set = shard_cache.ensure_shards(source, target_size=192, num_shards=16)
        shard_paths = shard_set.paths
    """
    conversion.check_parameters(
        source,
        target_size=target_size,
        num_shards=num_shards,
        jpeg_quality=jpeg_quality,
        seed=seed,
    )
    if output_dir is None:
        output_dir = default_output_dir(source, target_size=target_size, num_shards=num_shards)
    output_dir = conversion.check_output_dir(source, output_dir)
    fingerprint = conversion.input_fingerprint(
        source,
        target_size=target_size,
        num_shards=num_shards,
        jpeg_quality=jpeg_quality,
        seed=seed,
    )
    metadata = read_json(f"{output_dir}/{METADATA_FILE}") or {}
    if metadata.get("fingerprint") != fingerprint:
        reason = "none there" if not metadata else "the images or the parameters changed"
    else:
        reason = "; ".join(shard_files.shard_set_problems(output_dir, metadata))
    if metadata and not reason:
        print(f"Found {len(metadata['shards'])} shards in {output_dir}.")
    else:
        if metadata:
            print(f"Writing the shards again in {output_dir} ({reason}).")
        conversion.convert(
            source,
            output_dir,
            target_size=target_size,
            num_shards=num_shards,
            jpeg_quality=jpeg_quality,
            seed=seed,
        )
        metadata = read_metadata(output_dir)
    paths = shard_files.list_shards(output_dir, metadata)
    return ShardSet(
        output_dir=output_dir,
        paths=paths,
        class_names=list(metadata["class_names"]),
        num_records=metadata["num_records"],
        record_counts={f"{output_dir}/{name}": n for name, n in metadata["shards"].items()},
        target_size=metadata["target_size"],
        jpeg_quality=metadata["jpeg_quality"],
        fingerprint=metadata.get("fingerprint"),
    )


RESHARDED_FILE = "resharded.json"


def reshard(shard_set: ShardSet, num_shards: int) -> list[str]:
    """Returns `shard_set`'s records split into `num_shards` shards: written once, not decoded.

    The records are copied as they are, in order, into nearly equal shards (the set was
    shuffled when written, so each shard still mixes the classes): no image is decoded,
    resized or recompressed again. They go to the course cache, beside nothing of yours,
    and are found there on the next call while `shard_set` is unchanged.

    Args:
        shard_set: a finished set (`ensure_shards`).
        num_shards: the number of shards wanted; fewer if there are fewer records.

    Returns:
        The shard paths, sorted; `shard_set.paths` itself when it has `num_shards` shards.

    Example:
        paths_by_count = {n: shard_cache.reshard(shard_set, n) for n in [1, 4, 64]}
    """
    arguments.check_integer("num_shards", num_shards, 1)
    num_shards = min(num_shards, shard_set.num_records)
    if num_shards == len(shard_set.paths):
        return shard_set.paths
    # What the set is: its folder, its input and parameters, and its shards' counts.
    identity = [shard_set.output_dir, shard_set.fingerprint, shard_set.record_counts]
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    folder = str(data.default_cache_dir() / "tfrecords" / f"resharded-{key[:10]}-{num_shards}")
    sidecar = f"{folder}/{RESHARDED_FILE}"
    found = read_json(sidecar) or {}
    names = found.get("shards", {})
    if (
        found.get("fingerprint") == key
        and names
        and all(tf.io.gfile.exists(f"{folder}/{name}") for name in names)
    ):
        return sorted(f"{folder}/{name}" for name in names)
    tf.io.gfile.makedirs(folder)
    for name in [*names, RESHARDED_FILE]:  # Only what this function wrote there before.
        if "/" not in name and tf.io.gfile.exists(f"{folder}/{name}"):
            tf.io.gfile.remove(f"{folder}/{name}")
    serialized = tf.data.TFRecordDataset(shard_set.paths).as_numpy_iterator()
    counts = [len(part) for part in np.array_split(np.arange(shard_set.num_records), num_shards)]
    paths = [
        shard_files.write_shard(itertools.islice(serialized, count), folder, index)
        for index, count in enumerate(counts)
    ]
    write_json(
        sidecar,
        {
            "fingerprint": key,
            "shards": {Path(p).name: n for p, n in zip(paths, counts, strict=True)},
        },
    )
    print(f"Copied the {shard_set.num_records} records into {len(paths)} shards in {folder}.")
    return sorted(paths)
