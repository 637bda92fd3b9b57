"""Benchmarks lesson 7's pipeline through the tf.data service: 1 and 2 workers against none.

Steps:
1. Finds (or writes) the shards of the embedded dataset, as lesson 7 does.
2. Starts two local clusters on loopback ports (lesson 7's `data_service.LocalCluster`): a
   dispatcher with 1 worker, and a dispatcher with 2 workers. Both are stopped at the end,
   also after an error.
3. Times the same pipeline (each shard opened after a SIMULATED first-byte latency, one
   shard at a time per reader, then batched, parsed and decoded) in this process without
   the service, then through the service with 1 worker and with 2 (`"distributed_epoch"`),
   in alternation, `--repeats` times; and the CPU time that all the processes of each
   configuration use meanwhile (as cores busy, and per image).
4. Prints the load average before and after (timings on a shared machine mean little),
   and one row per configuration: images/s median and min-max, CPU cores busy and CPU
   milliseconds per image (medians). The CPU time per image is the steadier figure when
   other programs share the machine; the cores divided by it is what the CPU allows.

Usage:
    python -m tools.benchmark service                   # about 2 minutes on 2 idle cores
    python -m tools.benchmark service --latency-ms 0    # no waiting: where CPU is the limit
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import statistics

NO_SERVICE = "no service (this process)"


def service_pipeline(shard_paths, *, latency_ms, batch_size, target_size, num_classes, epochs):
    """Lesson 7's pipeline: shards read after a simulated latency, batched, parsed, decoded."""
    import tensorflow as tf

    from utils import pipeline
    from utils.lessons.scale_out_reading import data_service

    records = data_service.shards_with_latency(
        shard_paths, latency_ms=latency_ms, num_epochs=epochs
    )
    return records.batch(batch_size).map(
        lambda batch: pipeline.parse_batch(batch, target_size=target_size, num_classes=num_classes),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def _measure_once(make_dataset, service, pids_by_role, num_images, batch_size):
    """Returns (images/s, CPU cores busy, CPU ms per image) of one timing, through
    `service` or locally. The CPU time per image counts the warm-up batch too."""
    import tensorflow as tf

    from utils import timing
    from utils.lessons.scale_out_reading import processes

    dataset = make_dataset()
    if service is not None:
        distribute = tf.data.experimental.service.distribute("distributed_epoch", service)
        dataset = dataset.apply(distribute)
    with processes.CpuUse(pids_by_role) as cpu:
        with contextlib.redirect_stdout(io.StringIO()):
            result = timing.measure_throughput(dataset, num_images=num_images)
    cpu_ms_per_image = 1000 * cpu.cpu_seconds / (result.num_images + batch_size)
    return result.images_per_second, cpu.total, cpu_ms_per_image


def format_rows(results: dict) -> list[str]:
    """Returns the table: a header, then one row per configuration."""
    baseline = results[NO_SERVICE]["median"]
    lines = [
        f"{'pipeline':<28} {'images/s':>9} {'min-max':>15} {'CPU cores':>10} "
        f"{'CPU ms/image':>13} {'vs none':>8}"
    ]
    for label, figures in results.items():
        spread = f"{figures['min']:,.0f}-{figures['max']:,.0f}"
        lines.append(
            f"{label:<28} {figures['median']:>9,.0f} {spread:>15} "
            f"{figures['cpu_cores']:>10.2f} {figures['cpu_ms_per_image']:>13.3f} "
            f"{figures['median'] / baseline:>7.2f}x"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.benchmark service")
    parser.add_argument("--num-images", type=int, default=3670, help="embedded dataset size")
    parser.add_argument("--num-shards", type=int, default=16)
    parser.add_argument("--target-size", type=int, default=192)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=50.0, help="SIMULATED, per shard")
    parser.add_argument("--timed", type=int, default=4000, help="images timed per repetition")
    parser.add_argument("--repeats", type=int, default=3, help="alternating repetitions")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.timed < 1:
        parser.error(f"--repeats and --timed must be >= 1 (got {args.repeats}, {args.timed})")

    from utils.lab import shard_cache, sources
    from utils.lessons.scale_out_reading import data_service

    source = sources.resolve_source("embedded", num_images=args.num_images, seed=42)
    with contextlib.redirect_stdout(io.StringIO()):
        shard_set = shard_cache.ensure_shards(
            source, None, target_size=args.target_size, num_shards=args.num_shards, seed=42
        )
    shard_paths = shard_set.paths
    num_records = shard_set.num_records
    # Enough whole epochs for the warm-up and the timed images; each job then ends by itself.
    epochs = math.ceil((args.timed + 2 * args.batch_size) / num_records) + 1

    def make_dataset():
        return service_pipeline(
            shard_paths,
            latency_ms=args.latency_ms,
            batch_size=args.batch_size,
            target_size=args.target_size,
            num_classes=len(shard_set.class_names),
            epochs=epochs,
        )

    print(
        f"{len(shard_paths)} shards, {num_records} records of {args.target_size} px; SIMULATED "
        f"{args.latency_ms:g} ms per shard; {args.timed} images timed, {args.repeats} "
        f"alternating repetition(s); {os.cpu_count()} cores."
    )
    load_before = os.getloadavg()
    rates, cores, cpu_costs = {}, {}, {}
    client = {"client": os.getpid()}
    with (
        data_service.LocalCluster(num_workers=1) as one_worker,
        data_service.LocalCluster(num_workers=2) as two_workers,
    ):
        configurations = [
            (NO_SERVICE, None, client),
            ("service, 1 worker", one_worker.address, {**client, **one_worker.pids_by_role}),
            ("service, 2 workers", two_workers.address, {**client, **two_workers.pids_by_role}),
        ]
        for _ in range(args.repeats):
            for label, service, pids in configurations:
                rate, busy, cost = _measure_once(
                    make_dataset, service, pids, args.timed, args.batch_size
                )
                rates.setdefault(label, []).append(rate)
                cores.setdefault(label, []).append(busy)
                cpu_costs.setdefault(label, []).append(cost)
    load_after = os.getloadavg()
    results = {
        label: {
            "median": statistics.median(values),
            "min": min(values),
            "max": max(values),
            "cpu_cores": statistics.median(cores[label]),
            "cpu_ms_per_image": statistics.median(cpu_costs[label]),
        }
        for label, values in rates.items()
    }
    print("\n".join(format_rows(results)))
    print(
        "Load average (1, 5, 15 min) before: {:.2f} {:.2f} {:.2f}; after: {:.2f} {:.2f} "
        "{:.2f}.".format(*load_before, *load_after)
    )
    return 0
