"""Measures what each setting of the course pipeline buys: one knob changed at a time.

Lab 3 times `pipeline.tfrecord_images` on simulated storage with one setting changed
per run (parallel reads, shard count, order, prefetch, cache), and the unchanged
pipeline three times, whose spread is the machine's noise. The functions here run
those measurements and word their results; the lesson prints them.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import statistics
from typing import TYPE_CHECKING

import tensorflow as tf

from utils import pipeline, shard_files, timing

if TYPE_CHECKING:
    from utils.storage import SimulatedStorage

# The group of unchanged runs: its spread is the noise the other groups are judged by.
REPEATS = "course pipeline, again"

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


@dataclasses.dataclass
class Ablation:
    """The measurements of one ablation.

    Attributes:
        results: {knob: one `timing.ThroughputResult` per setting}, `REPEATS` first.
        most_open: {run label: most shards open at once during that run}.
        first_bytes_ms: every first-byte wait the storage drew, over all the runs.
    """

    results: dict[str, list[timing.ThroughputResult]]
    most_open: dict[str, int]
    first_bytes_ms: list[float]


def measure_knobs(
    shard_paths: list[str],
    *,
    paths_by_count: dict[int, list[str]],
    parallel_reads: list[int],
    storage: SimulatedStorage,
    target_size: int,
    num_classes: int,
    num_parallel_reads: int,
    batch_size: int,
    num_records: int,
    num_timed_images: int,
) -> Ablation:
    """Times the course pipeline three times unchanged, then with each knob changed.

    Prints each run's throughput and the most shards it had open at once.

    Args:
        shard_paths: the course's shards.
        paths_by_count: {shard count: the same records in that many shards}.
        parallel_reads: the settings of `num_parallel_reads` to time
            (`tf.data.AUTOTUNE` is labelled "AUTOTUNE").
        storage: the `storage.SimulatedStorage` to read through.
        target_size: side of the stored images.
        num_classes: length of the one-hot labels.
        num_parallel_reads: the course pipeline's parallel reads.
        batch_size: images per batch.
        num_records: records in `shard_paths` (a pass; the cache's run times the second).
        num_timed_images: images timed per run.

    Returns:
        An `Ablation`.
    """
    most_open: dict[str, int] = {}
    first_bytes_ms: list[float] = []

    def measure(label, paths=shard_paths, records_per_pass=num_records, **settings):
        course_settings = {"num_parallel_reads": num_parallel_reads, "batch_size": batch_size}
        variant = pipeline.tfrecord_images(
            paths,
            target_size=target_size,
            num_classes=num_classes,
            storage=storage,
            **{**course_settings, **settings},
        )
        warmup = math.ceil(records_per_pass / batch_size) if settings.get("cache") else 1
        storage.reset_counters()
        result = timing.measure_throughput(
            variant.repeat(), num_images=num_timed_images, num_warmup_elements=warmup, label=label
        )
        print(f"    most shards open at once: {storage.max_in_flight}")
        most_open[label] = storage.max_in_flight
        first_bytes_ms.extend(storage.latencies_ms)
        return result

    results = collections.defaultdict(list)
    for run in range(1, 4):
        results[REPEATS].append(measure(f"run {run}"))
    for reads in parallel_reads:
        label = "AUTOTUNE" if reads == tf.data.AUTOTUNE else str(reads)
        results["num_parallel_reads"].append(measure(label, num_parallel_reads=reads))
    for paths in paths_by_count.values():
        results["shards"].append(measure(str(len(paths)), paths=paths))
    cache_paths, cache_records = cache_sample(
        shard_paths, num_records=num_records, target_size=target_size
    )
    for knob, course_value in SWITCHES:
        for value in (course_value, not course_value):
            label, settings = str(value).lower(), {knob: value}
            if knob == "cache" and len(cache_paths) < len(shard_paths):
                label += f" ({len(cache_paths)} of {len(shard_paths)} shards)"
                settings.update(paths=cache_paths, records_per_pass=cache_records)
            results[knob].append(measure(label, **settings))
    return Ablation(dict(results), most_open, first_bytes_ms)


def noise(results: dict[str, list[timing.ThroughputResult]]) -> float:
    """Returns the spread of the unchanged runs: the machine's noise.

    Args:
        results: {knob: results}, with the unchanged runs under `REPEATS`.

    Returns:
        The fastest unchanged run's images/s over the slowest's, minus 1.
    """
    repeats = [result.images_per_second for result in results[REPEATS]]
    return max(repeats) / min(repeats) - 1


def describe_verdicts(ablation: Ablation, *, num_cores: int) -> list[str]:
    """Says how much each knob moved the throughput, against the machine's noise.

    Args:
        ablation: the measurements (with an "AUTOTUNE" run among `most_open`).
        num_cores: the machine's cores, named beside the AUTOTUNE line.

    Returns:
        The spread of the unchanged runs, the most shards AUTOTUNE kept open, then one
        line per knob: its best setting's gain over its worst, beyond or within the noise.
    """
    repeats = [result.images_per_second for result in ablation.results[REPEATS]]
    spread = noise(ablation.results)
    lines = [
        f"The same pipeline, three times: {min(repeats):,.0f} to {max(repeats):,.0f} images/s, "
        f"a spread of {spread:.0%}: differences smaller than that are noise.",
        f"With AUTOTUNE, at most {ablation.most_open['AUTOTUNE']} shards were open at once "
        f"on this machine's {num_cores} cores.",
    ]
    for knob, results in ablation.results.items():
        if knob == REPEATS:
            continue
        rates = [result.images_per_second for result in results]
        gain = max(rates) / min(rates) - 1
        verdict = "beyond the noise" if gain > spread else "within the noise"
        lines.append(f"{knob}: best setting {gain:.0%} above the worst, {verdict}.")
    return lines


def describe_ranges(results: dict[str, list[timing.ThroughputResult]]) -> list[str]:
    """Says how far each knob moved the throughput.

    Args:
        results: {knob: one result per setting}.

    Returns:
        One line per knob: from its slowest setting to its fastest, in images/s.
    """
    lines = []
    for knob, knob_results in results.items():
        best = max(knob_results, key=lambda result: result.images_per_second)
        worst = min(knob_results, key=lambda result: result.images_per_second)
        lines.append(
            f"{knob}: from {worst.images_per_second:,.0f} images/s ({worst.label}) "
            f"to {best.images_per_second:,.0f} images/s ({best.label})"
        )
    return lines


def describe_storage_demand(
    first_bytes_ms: list[float],
    *,
    images_per_second: float,
    bytes_per_record: float,
    stream_megabytes_per_second: float | None,
    host_images_per_second: int = 20_000,
) -> list[str]:
    """Says what the storage did, and what bandwidth the pipeline asks of it.

    Args:
        first_bytes_ms: the first-byte waits the storage drew.
        images_per_second: what the pipeline read.
        bytes_per_record: the shards' bytes per image.
        stream_megabytes_per_second: the bandwidth of one stream; None: no cap (the
            lines on streams are left out).
        host_images_per_second: what an accelerator host with many cores decodes.

    Returns:
        The lines to print.

    Raises:
        ValueError: if `first_bytes_ms` is empty.
    """
    if not first_bytes_ms:
        raise ValueError("`first_bytes_ms` must hold at least one wait. Received: []")
    needed_megabytes = images_per_second * bytes_per_record / 1e6
    lines = [
        f"{len(first_bytes_ms)} shard opens; first byte after "
        f"{statistics.median(first_bytes_ms):.0f} ms (median), "
        f"{max(first_bytes_ms):.0f} ms (slowest).",
        f"The fast pipeline reads {needed_megabytes:.1f} MB/s "
        f"({bytes_per_record / 1e3:.1f} kB per image).",
    ]
    if stream_megabytes_per_second:
        streams_needed = math.ceil(needed_megabytes / stream_megabytes_per_second)
        host_megabytes = host_images_per_second * bytes_per_record / 1e6
        host_streams = math.ceil(host_megabytes / stream_megabytes_per_second)
        lines += [
            f"One stream gives {stream_megabytes_per_second} MB/s: this pipeline needs "
            f"{streams_needed} stream(s) at once.",
            f"A host that decodes {host_images_per_second:,} of these images/s needs "
            f"{host_megabytes:,.0f} MB/s: {host_streams} streams at once.",
        ]
    return lines
