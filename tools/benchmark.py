"""Benchmarks the course pipeline against what learners would use instead, and the machine.

In one run, on the same embedded images and the same storage setting (local disk, then
50 ms simulated latency per object), it measures images/s of:
1. individual JPEG files with tf.data, one at a time and with 16 reads in flight;
2. `keras.utils.image_dataset_from_directory` on the same folder (its file reads go
   through the simulated storage);
3. the original course's TFRecord pipeline (per-record `parse_single_example`,
   `num_parallel_reads=AUTOTUNE`, order not kept);
4. the course pipeline (lab 3's: 16 parallel reads, parse by batch, prefetch);
5. Grain + ArrayRecord, what a JAX user picks instead (`course_benchmark.grain_loader`): the
   same records in ArrayRecord files, a global shuffle, Grain's 16 reading threads, parsed with
   protobuf and decoded with Pillow (libjpeg-turbo), batched alike; each file pays the
   same first-byte wait once per epoch; and once more with every record read a request
   of its own (random reads straight from object storage; not in turns with the
   headline); and Grain at its best: in worker processes, with the worker count and
   decoder that read fastest here at 0 ms, measured first (`course_benchmark.grain_best`).
   Skipped, with the reason, where `grain` or `array-record` is not installed
   (`requirements-grain.txt`);
6. the ceiling: the same JPEG bytes decoded from memory on all cores, no I/O.
The ceiling, 3, 4 and 5 are measured in turns (`comparison.measure_in_turns`: round 1 in order,
round 2 reversed, ...), 7 rounds; their ratios are taken within each round, and reported
as median, min-max and number of runs, against the issue's targets. 1 and 2 are
measured in turns among themselves, 3 rounds. Warm-up is excluded from every run.

Then the cost by cores: the ceiling and the course pipeline at 0 ms on 1, 2, 4, ... cores,
each in a child process pinned to them (`course_benchmark.cores`), 3 rounds (--quick: 1
core, 1 round).

Then how cost grows: images/s and peak memory (RSS) of reading with the course pipeline
as the dataset grows, the time to write the shards, and images/s as the shard count
changes (the shard counts read in turns). Each reading runs in a process of its own, so
that its peak memory is its own.

It prints the machine (CPU model, cores), and for each part the load average before and
after and the cores other processes kept busy: "The machine was NOT idle" when that is
over a tenth of the cores (`machine_load.describe_load`). Prints one table, and writes
`benchmark.json` and `benchmark.png` to `--output-dir`.

The side benchmarks, one module each in `tools/course_benchmark/`, run with their name
first (`SIDE_BENCHMARKS`; `python -m tools.benchmark NAME --help` for a side benchmark's options).

Usage:
    python -m tools.benchmark            # about 9 minutes on an idle 2-core VM, cache warm
    python -m tools.benchmark --quick    # small sizes, 2 rounds: what the tests run
    python -m tools.benchmark latency --quick   # a side benchmark: decode, latency, service,
                                                # training or big-folder
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path

from tools.building import machine
from tools.course_benchmark import cores, grain_best
from tools.course_benchmark.growth import (
    format_shard_counts,
    growth_summary,
    read_one_epoch,
    scaling,
)
from tools.course_benchmark.pipelines import (
    compare_pipelines,
    results_to_json,
)
from tools.course_benchmark.report import (
    cores_busy_lines,
    format_table,
    latency_and_grain_lines,
    plot,
    targets,
)
from tools.course_benchmark.settings import (
    FULL,
    GRAIN,
    QUICK,
    REPO_ROOT,
    TARGET_SIZE,
)
from utils.lab import progress

# `python -m tools.benchmark NAME ...`: NAME -> (its module, what it measures).
SIDE_BENCHMARKS = {
    "decode": ("tools.course_benchmark.decode", '"decode less": random crops, 3 ways'),
    "latency": ("tools.course_benchmark.latency", "the course pipeline behind remote storage"),
    "service": ("tools.course_benchmark.service", "lesson 7's pipeline, tf.data service"),
    "training": ("tools.course_benchmark.training", "lab 4's recipe: accuracy over seeds"),
    "big-folder": ("tools.course_benchmark.big_folder", "labs 2 and 3 on a big folder"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in SIDE_BENCHMARKS:
        return importlib.import_module(SIDE_BENCHMARKS[argv[0]][0]).main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m tools.benchmark",
        description=__doc__.splitlines()[0],
        epilog="Side benchmarks (python -m tools.benchmark NAME --help): "
        + "; ".join(f"{name}: {what}" for name, (_, what) in SIDE_BENCHMARKS.items())
        + ".",
    )
    parser.add_argument(
        "--quick", action="store_true", help="small sizes, 2 rounds for the headline"
    )
    parser.add_argument("--output-dir", type=Path, default=REPO_ROOT / "build" / "benchmark")
    parser.add_argument(
        "--read-one-epoch",
        metavar="SHARDS_DIR",
        help="only read the shards there once and print the figures as JSON (one process "
        "per reading: the benchmark runs itself so)",
    )
    parser.add_argument(
        "--on-cores",
        type=int,
        metavar="N",
        help="only pin this process to N cores, time the ceiling and the course pipeline "
        "once and print the figures as JSON (`course_benchmark.cores`)",
    )
    parser.add_argument("--reverse", action="store_true", help="--on-cores: the course first")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault(progress.DISABLE_ENV_VAR, "1")
    settings = QUICK if args.quick else FULL
    if args.on_cores:
        figures = cores.measure_on_cores(args.on_cores, settings, reverse=args.reverse)
        print(json.dumps(figures))
        return 0
    if args.read_one_epoch:
        print(json.dumps(read_one_epoch(args.read_one_epoch)))
        return 0
    from tools.course_benchmark import grain_loader
    from utils import machine_load

    grain_skipped = grain_loader.missing_reason()
    start = time.perf_counter()
    machine_line = machine.describe_machine()
    print(f"Machine: {machine_line}", flush=True)
    with machine_load.LoadWatch() as pipelines_load:
        print("Pipelines:", flush=True)
        results, grain_choice = compare_pipelines(settings)
    print(pipelines_load.summary(), flush=True)
    with machine_load.LoadWatch() as cores_load:
        print("Cores:", flush=True)
        by_cores = cores.by_cores(settings, quick=args.quick)
    print(cores_load.summary(), flush=True)
    results.update(by_cores)
    with machine_load.LoadWatch() as growth_load:
        print("Growth:", flush=True)
        scale = scaling(settings)
    lines = [
        f"Benchmark on {time.strftime('%Y-%m-%d %H:%M')}, {machine_line}; {settings['num_images']} "
        f"embedded images, {TARGET_SIZE} px shards; headline pipelines in turns, "
        f"{settings['headline_repeats']} rounds, the others {settings['repeats']}",
        f"Pipelines: {pipelines_load.summary()}",
        "",
        *format_table(results),
        "",
        *targets(results),
        *latency_and_grain_lines(results),
        *(grain_best.grain_best_lines(results, grain_choice) if grain_choice else []),
        *([grain_skipped] if grain_skipped else []),
        *cores_busy_lines(results, machine_load.usable_cores()),
        "",
        f"Cores: {cores_load.summary()}",
        *cores.cores_lines(results),
        "",
        f"Growth: {growth_load.summary()}",
        f"{'images':>8} {'write s':>8} {'read images/s':>14} {'peak RSS MB':>12}",
        *[
            f"{size:>8} {f['write_seconds']:>8.1f} {f['images_per_second']:>14,.0f} "
            f"{f['peak_rss_mb']:>12,.0f}"
            for size, f in scale["by_size"].items()
        ],
        *growth_summary(scale["by_size"]),
        "",
        *format_shard_counts(scale["by_shard_count"]),
    ]
    args.output_dir.mkdir(parents=True, exist_ok=True)
    load = {
        name: {
            "load_before": watch.load_before,
            "load_after": watch.load_after,
            "other_cores": watch.other_cores,
            "summary": watch.summary(),
        }
        for name, watch in [
            ("pipelines", pipelines_load),
            ("cores", cores_load),
            ("growth", growth_load),
        ]
    }
    report = {
        "settings": settings,
        "machine": machine_line,
        "load": load,
        "pipelines": results_to_json(results),
        "scaling": scale,
        "seconds": time.perf_counter() - start,
    }
    if grain_skipped:
        report["skipped"] = {GRAIN: grain_skipped}
    else:
        report["grain_best"] = grain_choice
    (args.output_dir / "benchmark.json").write_text(json.dumps(report, indent=2))
    plot(results, scale, args.output_dir / "benchmark.png")
    print("\n".join(lines))
    print(
        f"\nWrote {args.output_dir / 'benchmark.json'} and {args.output_dir / 'benchmark.png'} "
        f"in {report['seconds']:.0f} s."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
