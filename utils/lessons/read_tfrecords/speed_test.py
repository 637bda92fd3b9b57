"""What lab 3 prints about its shards, its readers and its speed test.

The lab keeps the pipelines it compares in view and times them with
`comparison.compare_in_turns`; here are the counts and sentences around them: the shards,
how many shards a reader keeps in flight, the order a reader's graph keeps, and the
summary of the speed test.
"""

from __future__ import annotations

import os

import tensorflow as tf

from utils import comparison, display
from utils.lab.shard_cache import ShardSet
from utils.storage import SimulatedStorage


def describe_shards(shards: ShardSet) -> str:
    """Says how many shards, of what size, hold how many records of which classes.

    Args:
        shards: the shards the lab reads (`shard_cache.ensure_shards`).

    Returns:
        One line, e.g. "16 shards of 1.6 MB, 3,670 records; 5 classes: daisy, ...".

    Example:
        print(speed_test.describe_shards(shards))
    """
    megabytes = sum(tf.io.gfile.stat(path).length for path in shards.paths) / 1e6
    return (
        f"{len(shards.paths)} shards of {megabytes / len(shards.paths):.1f} MB, "
        f"{shards.num_records:,} records; {len(shards.class_names):,} classes: "
        f"{display.short_list(shards.class_names)}"
    )


def shards_in_flight(
    records: tf.data.Dataset, storage: SimulatedStorage, num_parallel_reads: int
) -> str:
    """Reads `records` once and says the most shards the storage saw in flight at once.

    Args:
        records: a reader's records, read through `storage` (e.g. `read_shards(names, 16)`).
        storage: the storage the reader opens its shards through; its counters are reset.
        num_parallel_reads: what the reader was given, named in the line
            (`tf.data.AUTOTUNE` is named so).

    Returns:
        One line: "num_parallel_reads=16: 3,670 records, at most 16 shards in flight, on
        2 cores."

    Example:
        print(speed_test.shards_in_flight(read_shards(names, 16), simulated_storage, 16))
    """
    storage.reset_counters()
    count = sum(1 for _ in records)
    reads = "AUTOTUNE" if num_parallel_reads == tf.data.AUTOTUNE else num_parallel_reads
    return (
        f"num_parallel_reads={reads}: {count:,} records, at most {storage.max_in_flight} "
        f"shards in flight, on {os.cpu_count()} cores."
    )


def interleave_orders(dataset: tf.data.Dataset) -> list[tuple[str, str]]:
    """The interleave steps of `dataset`'s graph, each with its `deterministic` attribute.

    "true": the step keeps its inputs' order whatever `options.deterministic` says;
    "false": any order; "default": the order `options.deterministic` asks for.

    Args:
        dataset: the dataset whose graph is read (`tf.raw_ops.DatasetToGraphV2`).

    Returns:
        (op, deterministic) of each interleave step, from source to output.
    """
    variant = tf.data.experimental.to_variant(dataset)
    graph = tf.raw_ops.DatasetToGraphV2(input_dataset=variant)
    graph_def = tf.compat.v1.GraphDef.FromString(graph.numpy())
    return [
        (node.op, node.attr["deterministic"].s.decode())
        for node in graph_def.node
        if "Interleave" in node.op and "deterministic" in node.attr
    ]


def reading_order(dataset: tf.data.Dataset, label: str) -> str:
    """Says in which order `dataset` reads once asked for any order, from its graph.

    Args:
        dataset: a reader of several files, e.g. `tf.data.TFRecordDataset(paths,
            num_parallel_reads=16)`; `options.deterministic = False` is set on it here.
        label: how the line names the reader.

    Returns:
        One line: the reader, then "the files' order" and the step marked
        `deterministic: "true"` that keeps it, or "any order".

    Example:
        print(speed_test.reading_order(records, "read_shards(names)"))
    """
    options = tf.data.Options()
    options.deterministic = False
    steps = interleave_orders(dataset.with_options(options))
    kept = [op for op, deterministic in steps if deterministic == "true"]
    if kept:
        order = f'the files\' order: its {kept[0]} is marked deterministic "true"'
    else:
        order = "any order"
    return f"{label}, options.deterministic=False: {order}."


def summary(runs: dict[str, comparison.RepeatedResult]) -> str:
    """The speed test in one sentence: the shards read in parallel against individual files.

    Args:
        runs: `comparison.compare_in_turns`' results, in the lab's order: files one at a
            time first, files in parallel second, the shards read in parallel last.

    Returns:
        The medians of the three, and the median of the per-round ratios of the last to
        the first two, with their ranges (a round divides its own two runs, so this can
        differ from the ratio of the medians).

    Example:
        print(speed_test.summary(speed_runs))
    """
    files, parallel_files, *_, shards = runs.values()
    over_files = comparison.ratio_in_turns(shards, files)
    over_parallel = comparison.ratio_in_turns(shards, parallel_files)
    return (
        f"On the same simulated storage (medians of {shards.num_runs} rounds in turns): "
        f"individual files {files.median:,.1f} images/s one at a time, "
        f"{parallel_files.median:,.0f} in parallel; the shards read in parallel "
        f"{shards.median:,.0f} images/s. Median of the per-round ratios: "
        f"{over_files.median:,.0f}x the first ({over_files.minimum:,.0f}-"
        f"{over_files.maximum:,.0f}x) and {over_parallel.median:,.1f}x the second "
        f"({over_parallel.minimum:,.1f}-{over_parallel.maximum:,.1f}x)."
    )
