"""Measures what each setting of the course pipeline buys: one knob changed at a time.

Lesson 8 times `pipeline.tfrecord_images` on simulated storage with one setting changed
(`knob_settings`: parallel reads, shard count, where the epochs repeat, order, prefetch,
cache), the shard counts a pass at a time (`shard_count_dataset`: one stream per shard),
each knob's settings in turns (`comparison.measure_in_turns`, several rounds). A knob's
verdict follows the course's one rule (`comparison.verdict`): "beyond the noise" only when
its fastest and slowest medians differ by 10% or more and their ranges do not overlap.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import TYPE_CHECKING

import tensorflow as tf

from utils import arguments, comparison, pipeline, timing
from utils.lessons.where_the_time_goes import knob_settings

if TYPE_CHECKING:
    from utils.storage import SimulatedStorage

# tf.data's parallel interleave with both `cycle_length` and `num_parallel_calls` AUTOTUNE
# (`num_parallel_reads=tf.data.AUTOTUNE` here) reads ceil(cores / 3) inputs at once and opens
# twice that many ahead: its threads, current and future, match the cores
# (tensorflow/core/kernels/data/parallel_interleave_dataset_op.cc, `ComputeCycleLength`,
# `kDefaultCyclePrefetchFactor = 2`).
AUTOTUNE_CORES_PER_READ = 3

# "prefetch: false" means no prefetch at all: by default tf.data adds one of its own at the
# end of a pipeline that has none (`inject_prefetch`), which left the old "false" row
# prefetching too.
WITHOUT_INJECTED_PREFETCH = tf.data.Options()
WITHOUT_INJECTED_PREFETCH.experimental_optimization.inject_prefetch = False


def shard_count_dataset(
    shard_paths: list[str],
    *,
    storage: SimulatedStorage | None,
    target_size: int,
    num_classes: int,
    num_parallel_reads: int,
    batch_size: int,
) -> tf.data.Dataset:
    """The course pipeline over `shard_paths`, endless, a pass at a time: one stream per shard.

    The course pipeline repeats the file names before the reads (`epochs=None`), so a
    pass's shards open while the last pass's are read. With fewer shards than parallel
    reads, that opens one shard several times at once, each open its own stream with its
    own bandwidth: 1 shard read by 16 reads is 16 streams. Here the passes repeat after
    the pipeline instead, so that N shards are never more than N streams.

    Args:
        shard_paths: the shards.
        storage: the `storage.SimulatedStorage` to read through; None reads directly.
        target_size: side of the stored images.
        num_classes: length of the one-hot labels.
        num_parallel_reads: shards read at once (at most `len(shard_paths)` are).
        batch_size: images per batch.

    Returns:
        An endless dataset of (images, one-hot labels) batches.

    Example:
        one_shard = knobs.shard_count_dataset(paths[:1], storage=storage, target_size=192,
                                              num_classes=5, num_parallel_reads=16, batch_size=64)
    """
    one_pass = pipeline.tfrecord_images(
        shard_paths,
        target_size=target_size,
        num_classes=num_classes,
        storage=storage,
        num_parallel_reads=num_parallel_reads,
        batch_size=batch_size,
        epochs=1,
    )
    return one_pass.repeat()


@dataclasses.dataclass
class Ablation:
    """The measurements of one ablation.

    Attributes:
        results: {knob: one `comparison.RepeatedResult` of images/s per setting, labelled
            with the setting}, each knob's settings taken in turns.
        most_open: {knob: {setting: most shards open at once, over its rounds}}.
        first_bytes_ms: every first-byte wait the storage drew, over all the runs.
    """

    results: dict[str, list[comparison.RepeatedResult]]
    most_open: dict[str, dict[str, int]]
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
    repeats: int = 3,
) -> Ablation:
    """Times each knob's settings in turns, `repeats` rounds, the others as the course sets them.

    Prints each setting's median and range (`comparison.measure_in_turns`). The shard
    counts are read one pass at a time (`shard_count_dataset`): one stream per shard.

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
        num_records: records in `shard_paths` (a pass; the cache's runs time the second).
        num_timed_images: images timed per run.
        repeats: rounds; at least 2 for a range.

    Returns:
        An `Ablation`.

    Raises:
        ValueError: if `repeats` is below 2.
    """
    arguments.check_integer("repeats", repeats, 2)
    most_open: dict[str, dict[str, int]] = {}
    first_bytes_ms: list[float] = []

    def timed(knob, label, paths=shard_paths, records_per_pass=num_records, **settings):
        course = {"num_parallel_reads": num_parallel_reads, "batch_size": batch_size}
        if knob == "shards":
            variant = shard_count_dataset(
                paths, storage=storage, target_size=target_size, num_classes=num_classes, **course
            )
        else:
            settings = {**course, "epochs": 1 if settings.get("cache") else None, **settings}
            variant = pipeline.tfrecord_images(
                paths, target_size=target_size, num_classes=num_classes, storage=storage, **settings
            )
            if settings["epochs"] == 1:
                variant = variant.repeat()  # After the pipeline: it starts again at each pass.
            if settings.get("prefetch") is False:
                variant = variant.with_options(WITHOUT_INJECTED_PREFETCH)
        warmup = math.ceil(records_per_pass / batch_size) if settings.get("cache") else 1
        timer = timing.throughput_timer(
            variant, num_images=num_timed_images, num_warmup_elements=warmup
        )

        def run():
            storage.reset_counters()
            images_per_second = timer()
            opened = most_open.setdefault(knob, {})
            opened[label] = max(opened.get(label, 0), storage.max_in_flight)
            first_bytes_ms.extend(storage.latencies_ms)
            return images_per_second

        return run

    settings_by_knob = knob_settings.settings_by_knob(
        shard_paths,
        paths_by_count=paths_by_count,
        parallel_reads=parallel_reads,
        num_records=num_records,
        target_size=target_size,
    )
    results = {}
    for knob, settings in settings_by_knob.items():
        print(f"{knob}:")
        candidates = {label: timed(knob, label, **values) for label, values in settings.items()}
        runs = comparison.measure_in_turns(candidates, repeats=repeats)
        results[knob] = list(runs.values())
    return Ablation(results, most_open, first_bytes_ms)


def describe_verdicts(ablation: Ablation) -> list[str]:
    """Says, for each knob, whether its settings differ beyond the noise.

    Args:
        ablation: the measurements.

    Returns:
        One line per knob (`comparison.describe_difference`): its fastest and slowest
        settings, their medians and ranges, and `comparison.verdict`'s words: "beyond the
        noise", "small but consistent" or "not resolved in N rounds".
    """
    return [
        comparison.describe_difference(results, name=knob)
        for knob, results in ablation.results.items()
    ]


def describe_open_shards(ablation: Ablation, *, num_cores: int) -> str:
    """Says how many shards each `num_parallel_reads` setting kept open at most, and why AUTOTUNE's.

    Args:
        ablation: the measurements, with a "num_parallel_reads" knob.
        num_cores: the cores tf.data sees (its AUTOTUNE sizes the reads from them).

    Returns:
        One line, e.g. "Most shards open at once, by num_parallel_reads: 1: 3, 16: 16,
        AUTOTUNE: 3 (2 cores)." When AUTOTUNE is there, a sentence says how tf.data sizes
        it from the cores (`AUTOTUNE_CORES_PER_READ`); when 1 is there too, another
        compares them: the interleave opens the next shards before the current one ends,
        so one reader can have several open.
    """
    opened = ablation.most_open["num_parallel_reads"]
    counts = ", ".join(f"{label}: {count}" for label, count in opened.items())
    line = f"Most shards open at once, by num_parallel_reads: {counts} ({num_cores} cores)."
    if "AUTOTUNE" in opened:
        reads = math.ceil(num_cores / AUTOTUNE_CORES_PER_READ)
        line += (
            f" AUTOTUNE is sized from the cores: tf.data reads ceil(cores / "
            f"{AUTOTUNE_CORES_PER_READ}) = {reads} shard(s) at once on {num_cores} cores and "
            f"opens up to {2 * reads} more ahead, so its row measures this machine: a host "
            "with more cores reads more shards at once."
        )
    if "AUTOTUNE" in opened and "1" in opened:
        autotune, one = opened["AUTOTUNE"], opened["1"]
        if autotune <= one:
            line += (
                f" AUTOTUNE opened no more shards than num_parallel_reads=1 ({autotune} and "
                f"{one}): one reader too opens the next shards before the current one ends."
            )
        else:
            line += f" AUTOTUNE opened {autotune}, more than num_parallel_reads=1's {one}."
    return line


def describe_ranges(results: dict[str, list[comparison.RepeatedResult]]) -> list[str]:
    """Says how far each knob moved the throughput, median and range per setting.

    Args:
        results: {knob: one `RepeatedResult` per setting}.

    Returns:
        One line per knob: every setting's median and range, slowest first.
    """
    lines = []
    for knob, knob_results in results.items():
        ranges = [
            f"{result.label} {result.median:,.0f} ({result.minimum:,.0f}-{result.maximum:,.0f})"
            for result in sorted(knob_results, key=lambda result: result.median)
        ]
        lines.append(f"{knob}: {'; '.join(ranges)} images/s")
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
