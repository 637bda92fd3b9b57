"""How the course pipeline's cost grows: reading and writing as the data grows, and shard counts."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

from tools.course_benchmark.measure import (
    figures_of,
    quietly,
)
from tools.course_benchmark.settings import (
    BATCH_SIZE,
    NUM_CLASSES,
    NUM_PARALLEL_READS,
    NUM_SHARDS,
    REPO_ROOT,
    TARGET_SIZE,
)


def read_one_epoch(shards_dir: str) -> dict:
    """Reads every shard in `shards_dir` once with the course pipeline; returns its figures.

    Run it in a process of its own (`read_in_own_process`), so that each reading starts
    from the same state: no warm caches or threads of an earlier reading.

    Args:
        shards_dir: a folder of shards of `TARGET_SIZE` px images.

    Returns:
        `{"images_per_second": ..., "cores_busy": ..., "peak_rss_mb": ...}`; the first
        batch is the warm-up and is not timed; cores busy is this process's CPU time over
        the timed seconds; the peak memory is the whole process's.
    """

    from utils import pipeline, shard_files

    paths = shard_files.find_shards(shards_dir)
    dataset = pipeline.tfrecord_images(
        paths,
        target_size=TARGET_SIZE,
        num_classes=NUM_CLASSES,
        batch_size=BATCH_SIZE,
        num_parallel_reads=NUM_PARALLEL_READS,
    )
    count, start = 0, None
    for images, _ in dataset:
        if start is None:
            start, cpu_start = time.perf_counter(), time.process_time()  # After the warm-up.
        else:
            count += int(images.shape[0])
    seconds = time.perf_counter() - start
    cores_busy = (time.process_time() - cpu_start) / seconds
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "images_per_second": count / seconds,
        "cores_busy": cores_busy,
        "peak_rss_mb": peak_rss_mb,
    }


def read_in_own_process(shards_dir: str) -> dict:
    """Runs `read_one_epoch` in a new process (`--read-one-epoch`); returns its figures."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-m", "tools.benchmark", "--read-one-epoch", str(shards_dir)]
    result = subprocess.run(
        command, capture_output=True, text=True, env=env, check=True, timeout=600, cwd=REPO_ROOT
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def scaling(settings: dict) -> dict:
    """Measures reading and writing as the dataset grows, and reading as shards change."""
    from utils import comparison
    from utils.lab import conversion, shard_cache, sources

    by_size = {}
    for size in settings["sizes"]:
        print(f"  {size} images ...", flush=True)
        source = sources.resolve_source("embedded", num_images=size)
        output_dir = shard_cache.default_output_dir(
            source, target_size=TARGET_SIZE, num_shards=NUM_SHARDS
        )
        report = quietly(
            conversion.convert, source, output_dir, target_size=TARGET_SIZE, num_shards=NUM_SHARDS
        )
        by_size[size] = {"write_seconds": report.seconds, **read_in_own_process(output_dir)}
    largest = sources.resolve_source("embedded", num_images=settings["sizes"][-1])
    shard_dirs = {}
    for count in settings["shard_counts"]:
        print(f"  {count} shards ...", flush=True)
        shard_set = quietly(
            shard_cache.ensure_shards, largest, target_size=TARGET_SIZE, num_shards=count
        )
        shard_dirs[count] = shard_set.output_dir
    # Every shard count is read once per round, in turns, each in a process of its own:
    # a count read right after its shards were written is not alone in paying for it.
    readings = {count: [] for count in shard_dirs}
    rates = {
        count: (lambda d=directory, c=count: _record(readings[c], read_in_own_process(d)))
        for count, directory in shard_dirs.items()
    }
    print(f"  reading them in turns, {settings['repeats']} rounds ...", flush=True)
    measured = quietly(comparison.measure_in_turns, rates, repeats=settings["repeats"])
    by_shards = {
        count: {
            **figures_of(measured[count]),
            "cores_busy": [r["cores_busy"] for r in readings[count]],
            "peak_rss_mb": max(r["peak_rss_mb"] for r in readings[count]),
        }
        for count in shard_dirs
    }
    return {"by_size": by_size, "by_shard_count": by_shards}


def _record(readings: list, figures: dict) -> float:
    readings.append(figures)
    return figures["images_per_second"]


def format_shard_counts(by_shard_count: dict) -> list[str]:
    """Formats reading images/s by shard count: median, range, runs and cores busy per run."""
    lines = [
        f"{'shards':>8} {'read images/s':>14} {'min-max':>15} {'runs':>4} {'peak RSS MB':>12}"
        "  cores busy, each run"
    ]
    for count, figures in by_shard_count.items():
        spread = f"{figures['min']:,.0f}-{figures['max']:,.0f}"
        busy = " ".join(f"{cores:.2f}" for cores in figures["cores_busy"])
        lines.append(
            f"{count:>8} {figures['median']:>14,.0f} {spread:>15} {len(figures['runs']):>4} "
            f"{figures['peak_rss_mb']:>12,.0f}  {busy}"
        )
    return lines


def growth_summary(by_size: dict) -> list[str]:
    """Says, from the numbers, whether each cost grows linearly with the dataset."""
    sizes = sorted(by_size)
    small, large = by_size[sizes[0]], by_size[sizes[-1]]
    factor = sizes[-1] / sizes[0]
    write = large["write_seconds"] / small["write_seconds"]
    rate = large["images_per_second"] / small["images_per_second"]
    memory = large["peak_rss_mb"] / small["peak_rss_mb"]
    write_verdict = "linear" if 0.5 * factor <= write <= 1.5 * factor else "NOT linear"
    rate_verdict = "flat" if 0.7 <= rate <= 1.4 else "NOT flat"
    memory_verdict = "flat: nothing is cached whole" if memory <= 1.5 else "GROWS"
    return [
        f"From {sizes[0]} to {sizes[-1]} images ({factor:.0f}x):",
        f"  write time grew {write:.1f}x ({write_verdict}, within 50%)",
        f"  reading images/s changed {rate:.2f}x ({rate_verdict})",
        f"  peak memory of reading changed {memory:.2f}x ({memory_verdict})",
    ]
