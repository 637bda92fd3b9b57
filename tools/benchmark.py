"""Benchmarks the course pipeline against what learners would use instead, and the machine.

In one run, on the same embedded images and the same storage setting (local disk, then
50 ms simulated latency per object), it measures images/s of:
1. individual JPEG files with tf.data, one at a time and with 16 reads in flight;
2. `keras.utils.image_dataset_from_directory` on the same folder (its file reads go
   through the simulated storage);
3. the original course's TFRecord pipeline (per-record `parse_single_example`,
   `num_parallel_reads=AUTOTUNE`, order not kept);
4. the course pipeline (lab 3's: 16 parallel reads, parse by batch, prefetch);
5. Grain + ArrayRecord, what a JAX user picks instead (`tools.grain_loader`): the same
   records in ArrayRecord files, a global shuffle, Grain's 16 reading threads, parsed with
   protobuf and decoded with Pillow (libjpeg-turbo), batched alike; each file pays the
   same first-byte wait once per epoch; and once more with every record read a request
   of its own (random reads straight from object storage; not in turns with the
   headline). Skipped, with the reason, where `grain` or
   `array-record` is not installed (`requirements-grain.txt`);
6. the ceiling: the same JPEG bytes decoded from memory on all cores, no I/O.
The ceiling, 3, 4 and 5 are measured in turns (`comparison.measure_in_turns`: round 1 in order,
round 2 reversed, ...), 7 rounds; their ratios are taken within each round, and reported
as median, min-max and number of runs, against the issue's targets. 1 and 2 are
measured in turns among themselves, 3 rounds. Warm-up is excluded from every run.

Then how cost grows: images/s and peak memory (RSS) of reading with the course pipeline
as the dataset grows, the time to write the shards, and images/s as the shard count
changes (the shard counts read in turns). Each reading runs in a process of its own, so
that its peak memory is its own.

It prints the machine (CPU model, cores), and for each part the load average before and
after and the cores other processes kept busy: "The machine was NOT idle" when that is
over a tenth of the cores (`machine_load.describe_load`). Prints one table, and writes
`benchmark.json` and `benchmark.png` to `--output-dir`.

Usage:
    python -m tools.benchmark            # about 12 minutes on an idle 2-core VM, cache warm
    python -m tools.benchmark --quick    # about 1 minute: small sizes, 2 rounds
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from tools import machine
from utils import progress

REPO_ROOT = Path(__file__).resolve().parents[1]
LATENCIES_MS = (0, 50)
TARGET_SIZE = 192
BATCH_SIZE = 64
NUM_PARALLEL_READS = 16
NUM_SHARDS = 16  # Of the pipelines' data and of each growth size.
NUM_CLASSES = 5  # The embedded flowers' classes.
FULL = dict(num_images=3670, headline_repeats=7, repeats=3, sizes=[1000, 4000, 16000],
            shard_counts=[4, 16, 64], timed=8000, timed_files=400, timed_sequential=40)  # fmt: skip
QUICK = dict(num_images=300, headline_repeats=2, repeats=1, sizes=[200, 400], shard_counts=[2, 4],
             timed=600, timed_files=60, timed_sequential=6)  # fmt: skip
# Measured in turns with the ceiling, `headline_repeats` rounds: the ratios that are quoted.
FILES_ONE_AT_A_TIME = "files, one at a time"
FILES_IN_FLIGHT = f"files, {NUM_PARALLEL_READS} in flight"
FROM_DIRECTORY = "image_dataset_from_directory"
ORIGINAL = "original course TFRecords"
COURSE = "course pipeline"
GRAIN = "Grain + ArrayRecord"
GRAIN_PER_RECORD = "Grain, a request per record"
HEADLINE = (ORIGINAL, COURSE, GRAIN)


class Row(NamedTuple):
    """What one result measured: a pipeline, at a simulated latency (None: no I/O at all)."""

    pipeline: str
    latency_ms: int | None = None

    @property
    def label(self) -> str:
        """The row's name in the table and in `benchmark.json`: `pipeline @ N ms`."""
        if self.latency_ms is None:
            return self.pipeline
        return f"{self.pipeline} @ {self.latency_ms} ms"


CEILING = Row("decode ceiling (no I/O)")
# The targets for the course pipeline.
TARGET_SHARE_OF_CEILING = {0: 0.95, 50: 0.9}  # Its images/s / the ceiling's, by latency (ms).
TARGET_SPREAD = 0.05  # That share's range around its median, either side.
TARGET_OVER_ORIGINAL = 1.3  # Its images/s / the original course's, at the first latency.
TARGET_LATENCY_RATIO = 0.97  # Its images/s at the last latency / at the first.
TARGET_OVER_FROM_DIRECTORY = 10  # Its images/s / image_dataset_from_directory's, last latency.


def _quietly(function, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):
        return function(*args, **kwargs)


def _rate(make_dataset, num_images: int, cpu_log: list | None = None):
    """Returns a function that times a fresh `make_dataset()` (warm-up excluded): images/s.

    With `cpu_log`, each run also appends this process's CPU seconds per image to it.
    `make_dataset` may return a `tf.data.Dataset` or any iterable of (images, labels)
    batches (a Grain dataset).
    """
    import tensorflow as tf

    from utils import timing

    def measure() -> float:
        dataset = make_dataset()
        if not isinstance(dataset, tf.data.Dataset):
            images_per_second, cpu_per_image = _time_iterable(dataset, num_images)
        else:
            result = _quietly(timing.measure_throughput, dataset, num_images=num_images)
            images_per_second = result.images_per_second
            cpu_per_image = result.cpu_seconds / result.num_images
        if cpu_log is not None:
            cpu_log.append(cpu_per_image)
        return images_per_second

    return measure


def _time_iterable(dataset, num_images: int) -> tuple[float, float]:
    """Times batches from any iterable (a Grain dataset), as `measure_throughput` does.

    The first batch is the warm-up and is not timed. The iterator is closed at the end,
    so that its reading threads stop before the next run starts.

    Returns:
        (images/s, this process's CPU seconds per image).
    """
    iterator = iter(dataset)
    try:
        next(iterator)
        counted, start, cpu_start = 0, time.perf_counter(), time.process_time()
        for images, _ in iterator:
            counted += len(images)
            if counted >= num_images:
                break
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    finally:
        if hasattr(iterator, "close"):
            iterator.close()
    return counted / seconds, cpu_seconds / counted


def _figures(result) -> dict:
    return {"median": result.median, "min": result.minimum, "max": result.maximum,
            "runs": list(result.values)}  # fmt: skip


def pipelines(source, shard_paths, class_names, storage, settings, array_records=None) -> dict:
    """Returns the pipelines to compare, by name: (make_dataset, images to time).

    Grain + ArrayRecord is among them when `array_records` (its files) is given.
    """
    import keras
    import tensorflow as tf

    from tools import read_routing
    from utils import conversion, pipeline

    slow = storage.latency_ms > 0
    image_root = source.pattern.rsplit("/", 2)[0]

    def files(parallel: bool):
        # The source's own list: a local folder's path is never used as a glob.
        image_paths = conversion.source_paths(source)
        paths = tf.data.Dataset.from_tensor_slices(image_paths).shuffle(len(image_paths), seed=0)

        def decode(path):
            return tf.io.decode_jpeg(storage.read_file(path), channels=3)

        if not parallel:
            return paths.map(decode)
        options = tf.data.Options()
        options.threading.private_threadpool_size = NUM_PARALLEL_READS
        return paths.map(decode, num_parallel_calls=NUM_PARALLEL_READS).with_options(options)

    def from_directory():
        # Keras reads each file with tf.io.read_file while it builds the dataset's map:
        # route those reads through the (simulated) storage.
        with read_routing.routing_tf_read_file(storage):
            dataset = _quietly(
                keras.utils.image_dataset_from_directory,
                image_root,
                image_size=(TARGET_SIZE, TARGET_SIZE),
                batch_size=32,
            )
        return dataset.repeat()

    features = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "one_hot_class": tf.io.VarLenFeature(tf.float32),
    }

    def original_course():
        def read_tfrecord(serialized):
            record = tf.io.parse_single_example(serialized, features)
            image = tf.io.decode_jpeg(record["image"], channels=3)
            image = tf.reshape(image, [TARGET_SIZE, TARGET_SIZE, 3])
            return image, tf.sparse.to_dense(record["one_hot_class"])

        records = storage.tfrecord_dataset(shard_paths, num_parallel_reads=tf.data.AUTOTUNE)
        ignore_order = tf.data.Options()
        ignore_order.deterministic = False
        records = records.with_options(ignore_order)
        dataset = records.map(read_tfrecord, num_parallel_calls=tf.data.AUTOTUNE)
        return dataset.batch(BATCH_SIZE).prefetch(tf.data.AUTOTUNE).repeat()

    def course():
        return pipeline.tfrecord_images(
            shard_paths,
            target_size=TARGET_SIZE,
            num_classes=len(class_names),
            batch_size=BATCH_SIZE,
            storage=storage,
            num_parallel_reads=NUM_PARALLEL_READS,
            epochs=None,  # Endless, the epochs joined before the reads.
        )

    def grain_arrayrecord(request_per_record=False):
        from tools import grain_loader

        return grain_loader.grain_images(
            array_records,
            num_classes=len(class_names),
            batch_size=BATCH_SIZE,
            storage=storage,
            request_per_record=request_per_record,
        )

    named = {
        FILES_ONE_AT_A_TIME: (
            lambda: files(False).repeat(),
            settings["timed_sequential"] if slow else settings["timed_files"],
        ),
        FILES_IN_FLIGHT: (lambda: files(True).repeat(), settings["timed_files"]),
        FROM_DIRECTORY: (
            from_directory,
            settings["timed_files"] // (4 if slow else 1),
        ),
        ORIGINAL: (original_course, settings["timed"]),
        COURSE: (course, settings["timed"]),
    }
    if array_records:
        named[GRAIN] = (grain_arrayrecord, settings["timed"])
        named[GRAIN_PER_RECORD] = (
            lambda: grain_arrayrecord(request_per_record=True),
            settings["timed_files"] if slow else settings["timed"],
        )
    return named


def compare_pipelines(settings: dict) -> dict:
    """Measures every pipeline at each latency, and the decode ceiling; returns the results.

    The headline pipelines (the ceiling, the original course's TFRecords and the course
    pipeline at each latency) are measured in turns, `headline_repeats` rounds; the slower
    rest in turns among themselves, `repeats` rounds. Each result keeps its runs, in round
    order, so that ratios are taken within a round (`comparison.ratio_in_turns`).
    """
    import tensorflow as tf

    from tools import grain_loader
    from utils import pipeline, records, shard_cache, sources, storage

    source = sources.resolve_source("embedded", num_images=settings["num_images"])
    shard_set = _quietly(
        shard_cache.ensure_shards, source, target_size=TARGET_SIZE, num_shards=NUM_SHARDS
    )
    shard_paths = shard_set.paths
    skipped = grain_loader.missing_reason()
    array_records = None if skipped else grain_loader.ensure_array_records(shard_paths)
    if skipped:
        print(f"  {skipped}", flush=True)
    stored_jpegs = [
        records.parse_record(record)["image"].numpy()
        for record in tf.data.TFRecordDataset(shard_paths).take(1000)
    ]
    ceiling = lambda: pipeline.decode_ceiling_dataset(stored_jpegs, batch_size=BATCH_SIZE)  # noqa: E731
    cpu = {CEILING: []}
    headline = {CEILING: _rate(ceiling, settings["timed"], cpu[CEILING])}
    others = {}
    for latency in LATENCIES_MS:
        simulated = storage.SimulatedStorage(latency_ms=latency)
        named = pipelines(
            source, shard_paths, shard_set.class_names, simulated, settings, array_records
        )
        for name, (make_dataset, num_images) in named.items():
            row = Row(name, latency)
            if name in HEADLINE:
                cpu[row] = []
                headline[row] = _rate(make_dataset, num_images, cpu[row])
            else:
                others[row] = _rate(make_dataset, num_images)
    print(f"  headline: {len(headline)} pipelines in turns, {settings['headline_repeats']} "
          "rounds ...", flush=True)  # fmt: skip
    measured = _in_turns_by_row(headline, repeats=settings["headline_repeats"])
    print(f"  the others: {len(others)} in turns, {settings['repeats']} rounds ...", flush=True)
    measured.update(_in_turns_by_row(others, repeats=settings["repeats"]))
    order = [CEILING] + [Row(name, latency) for latency in LATENCIES_MS for name in named]
    results = {row: _figures(measured[row]) for row in order}
    for row, per_image in cpu.items():
        results[row]["cpu_us_per_image"] = [seconds * 1e6 for seconds in per_image]
    return results


def _in_turns_by_row(candidates: dict, repeats: int) -> dict:
    """`comparison.measure_in_turns` over `Row` -> candidate; its results keyed by the same rows."""
    from utils import comparison

    by_label = {row.label: row for row in candidates}
    measured = comparison.measure_in_turns(
        {row.label: candidate for row, candidate in candidates.items()}, repeats=repeats
    )
    return {by_label[label]: result for label, result in measured.items()}


def results_to_json(results: dict) -> dict:
    """The results as `benchmark.json` holds them: by label, each with its row's fields."""
    return {
        row.label: {"pipeline": row.pipeline, "latency_ms": row.latency_ms, **figures}
        for row, figures in results.items()
    }


def results_from_json(by_label: dict) -> dict:
    """`benchmark.json`'s pipelines back as `Row` -> figures (from the fields, not the label)."""
    return {
        Row(figures["pipeline"], figures["latency_ms"]): {
            key: value for key, value in figures.items() if key not in Row._fields
        }
        for figures in by_label.values()
    }


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
    import resource

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
    from utils import comparison, conversion, shard_cache, sources

    by_size = {}
    for size in settings["sizes"]:
        print(f"  {size} images ...", flush=True)
        source = sources.resolve_source("embedded", num_images=size)
        output_dir = shard_cache.default_output_dir(
            source, target_size=TARGET_SIZE, num_shards=NUM_SHARDS
        )
        report = _quietly(
            conversion.convert, source, output_dir, target_size=TARGET_SIZE, num_shards=NUM_SHARDS
        )
        by_size[size] = {"write_seconds": report.seconds, **read_in_own_process(output_dir)}
    largest = sources.resolve_source("embedded", num_images=settings["sizes"][-1])
    shard_dirs = {}
    for count in settings["shard_counts"]:
        print(f"  {count} shards ...", flush=True)
        shard_set = _quietly(
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
    measured = _quietly(comparison.measure_in_turns, rates, repeats=settings["repeats"])
    by_shards = {
        count: {
            **_figures(measured[count]),
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


# A run whose own process kept fewer than this share of the cores busy, on an idle
# machine, decoded at a fraction of the machine's rate: on the project's 2-core VM some
# processes decode at one core's rate (6,3xx images/s) with both cores half idle.
FULL_CORES_SHARE = 0.75


def cores_busy_lines(results: dict, num_cores: int) -> list[str]:
    """Says, per headline pipeline, how many cores each run kept busy, and which fell short.

    A run's cores busy is its CPU time per image x its images/s. Runs without simulated
    latency (nothing to wait for) that kept fewer than `FULL_CORES_SHARE` of the cores busy
    explain a low end of a range that the work per image does not: the pipeline waited,
    with cores idle, rather than worked more. Runs at a simulated latency are listed but
    not counted: waiting for storage is what they measure.

    Args:
        results: the headline results, with `runs` (images/s) and `cpu_us_per_image`.
        num_cores: the machine's cores.

    Returns:
        One line per pipeline that has CPU times, then one line that counts the short runs
        without simulated latency.
    """
    lines, short, total = [], 0, 0
    threshold = FULL_CORES_SHARE * num_cores
    for row, figures in results.items():
        if "cpu_us_per_image" not in figures:
            continue
        pairs = zip(figures["runs"], figures["cpu_us_per_image"], strict=True)
        busy = [rate * cpu_us / 1e6 for rate, cpu_us in pairs]
        if not row.latency_ms:  # No I/O, or local disk: nothing to wait for.
            short += sum(cores < threshold for cores in busy)
            total += len(busy)
        lines.append(f"  {row.label}: cores busy per run " + " ".join(f"{c:.2f}" for c in busy))
    lines.append(
        f"  runs without simulated latency that kept fewer than {threshold:.1f} of {num_cores} "
        f"cores busy: {short} of {total}"
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


def format_table(results: dict) -> list[str]:
    """Formats the pipeline results with ratios (of medians) to the ceiling and to files."""
    ceiling = results[CEILING]["median"]
    lines = [
        f"{'pipeline':<38} {'images/s':>10} {'min-max':>15} {'runs':>4} {'/ceiling':>8} "
        f"{'/files 1x1':>10}",
    ]
    for row, figures in results.items():
        baseline = results.get(Row(FILES_ONE_AT_A_TIME, row.latency_ms), figures)["median"]
        spread = f"{figures['min']:,.0f}-{figures['max']:,.0f}"
        lines.append(
            f"{row.label:<38} {figures['median']:>10,.1f} {spread:>15} {len(figures['runs']):>4} "
            f"{figures['median'] / ceiling:>8.3f} {figures['median'] / baseline:>9.1f}x"
        )
    return lines


def _in_turns(results: dict, numerator: Row, denominator: Row, *, key: str = "runs"):
    """The ratio of two headline results, round by round (`comparison.ratio_in_turns`)."""
    from utils import comparison

    return comparison.ratio_in_turns(
        comparison.RepeatedResult(numerator.label, tuple(results[numerator][key])),
        comparison.RepeatedResult(denominator.label, tuple(results[denominator][key])),
    )


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def targets(results: dict) -> list[str]:
    """Checks the issue's targets against these results, ratios taken within each round."""
    lines = []
    for latency in LATENCIES_MS:
        share = _in_turns(results, Row(COURSE, latency), CEILING)
        target = TARGET_SHARE_OF_CEILING[latency]
        low, high = share.median - share.minimum, share.maximum - share.median
        spread_met = max(low, high) <= TARGET_SPREAD
        lines.append(
            f"{COURSE} at {latency} ms / decode ceiling: {share.median:.2f} "
            f"(range {share.minimum:.2f}-{share.maximum:.2f}, -{low:.2f}/+{high:.2f}, "
            f"{share.num_runs} runs in turns); target >= {target}: "
            f"{_verdict(share.median >= target)}; spread within "
            f"+-{TARGET_SPREAD}: {_verdict(spread_met)}"
        )
        if "cpu_us_per_image" in results[CEILING]:
            work = _in_turns(results, CEILING, Row(COURSE, latency), key="cpu_us_per_image")
            lines.append(
                f"  work share at {latency} ms (the ceiling's CPU time per image / the "
                f"pipeline's; moves little with load): {work.median:.2f} "
                f"(range {work.minimum:.2f}-{work.maximum:.2f})"
            )
    speedups = [
        _in_turns(results, Row(COURSE, latency), Row(ORIGINAL, latency)) for latency in LATENCIES_MS
    ]
    lines.append(
        f"{COURSE} / original course pipeline: "
        + ", ".join(
            f"{s.median:.2f}x ({s.minimum:.2f}-{s.maximum:.2f}) at {latency} ms"
            for s, latency in zip(speedups, LATENCIES_MS, strict=True)
        )
        + f"; target >= {TARGET_OVER_ORIGINAL}x at {LATENCIES_MS[0]} ms: "
        + _verdict(speedups[0].median >= TARGET_OVER_ORIGINAL)
    )
    slow = LATENCIES_MS[-1]
    directory = results[Row(FROM_DIRECTORY, slow)]["median"]
    course = results[Row(COURSE, slow)]["median"]
    lines.append(
        f"{COURSE} / {FROM_DIRECTORY} at {slow} ms: {course / directory:.1f}x "
        f"(medians); target >= {TARGET_OVER_FROM_DIRECTORY}x: "
        f"{_verdict(course / directory >= TARGET_OVER_FROM_DIRECTORY)}"
    )
    return lines


def _ratio_text(ratio) -> str:
    spread = f"range {ratio.minimum:.2f}-{ratio.maximum:.2f}"
    return f"{ratio.median:.2f} ({spread}, {ratio.num_runs} runs)"


def latency_and_grain_lines(results: dict) -> list[str]:
    """Says what the latency costs each pipeline, and where Grain + ArrayRecord stands.

    Every ratio is taken within each round of the headline's turns (`comparison.ratio_in_turns`)
    and given as median and range. CPU time per image moves far less with other load than
    images/s, so it is given too (median and range, microseconds).

    Args:
        results: the pipeline results; Grain's rows may be missing (not installed).

    Returns:
        One line for the course pipeline's latency ratio; for Grain, if measured, its
        latency ratio and, at each latency, its ratio to the ceiling and to the course
        pipeline and both CPU times per image.
    """
    from utils.comparison import spread

    fast, slow = LATENCIES_MS
    lines = [
        f"{name} at {slow} ms / at {fast} ms: "
        + _ratio_text(_in_turns(results, Row(name, slow), Row(name, fast)))
        + (f"; target >= {TARGET_LATENCY_RATIO}" if name == COURSE else "")
        for name in (COURSE, GRAIN)
        if Row(name, fast) in results
    ]
    for latency in LATENCIES_MS if Row(GRAIN, fast) in results else ():
        grain, course = Row(GRAIN, latency), Row(COURSE, latency)
        lines.append(
            f"{GRAIN} at {latency} ms / decode ceiling: "
            f"{_ratio_text(_in_turns(results, grain, CEILING))}; / {COURSE}: "
            f"{_ratio_text(_in_turns(results, grain, course))}"
        )
        cpu = [spread(results[row]["cpu_us_per_image"]) for row in (grain, course)]
        lines.append(
            f"  CPU time per image at {latency} ms, microseconds: {GRAIN} {cpu[0]}; "
            f"{COURSE} {cpu[1]}"
        )
    return lines


def plot(results: dict, scale: dict, path: Path) -> None:
    """Saves the pipelines (log scale, with min-max) and the growth curves in one figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (bars, growth) = plt.subplots(1, 2, figsize=(14, 5), width_ratios=[2, 1])
    rows = list(results)
    medians = [results[row]["median"] for row in rows]
    errors = [[m - results[row]["min"] for row, m in zip(rows, medians, strict=True)],
              [results[row]["max"] - m for row, m in zip(rows, medians, strict=True)]]  # fmt: skip
    colors = ["black" if row.latency_ms is None else "tab:orange" if row.latency_ms else "tab:blue"
              for row in rows]  # fmt: skip
    drawn = bars.barh([row.label for row in rows], medians, xerr=errors, color=colors)
    for bar, row in zip(drawn, rows, strict=True):
        if row.pipeline in (GRAIN, GRAIN_PER_RECORD):
            bar.set_hatch("//")
    bars.set_xscale("log")
    bars.invert_yaxis()
    bars.set_xlabel(
        f"images/s (log scale; blue: local disk, orange: {LATENCIES_MS[-1]} ms simulated latency)"
    )
    bars.set_title(f"Pipelines on the same data (hatched: {GRAIN})")
    sizes = sorted(scale["by_size"])
    rates = [scale["by_size"][s]["images_per_second"] for s in sizes]
    memory = [scale["by_size"][s]["peak_rss_mb"] for s in sizes]
    growth.plot(sizes, rates, "o-", label="reading, images/s")
    growth.set_xscale("log")
    growth.set_xlabel("images in the dataset")
    growth.set_ylabel("images/s")
    other = growth.twinx()
    other.plot(sizes, memory, "s--", color="tab:red", label="peak RSS, MB")
    other.set_ylabel("peak RSS of reading (MB)")
    other.set_ylim(0, max(memory) * 1.3)
    growth.set_ylim(0, max(rates) * 1.3)
    growth.set_xticks(sizes, labels=[f"{size:,}" for size in sizes])
    growth.minorticks_off()
    growth.set_title("As the dataset grows")
    lines = growth.get_lines() + other.get_lines()  # One legend for both axes, at the top.
    growth.legend(lines, [line.get_label() for line in lines], loc="upper left", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault(progress.DISABLE_ENV_VAR, "1")
    if args.read_one_epoch:
        print(json.dumps(read_one_epoch(args.read_one_epoch)))
        return 0
    settings = QUICK if args.quick else FULL
    from tools import grain_loader
    from utils import machine_load

    grain_skipped = grain_loader.missing_reason()
    start = time.perf_counter()
    machine_line = machine.describe_machine()
    print(f"Machine: {machine_line}", flush=True)
    with machine_load.LoadWatch() as pipelines_load:
        print("Pipelines:", flush=True)
        results = compare_pipelines(settings)
    print(pipelines_load.summary(), flush=True)
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
        *([grain_skipped] if grain_skipped else []),
        *cores_busy_lines(results, os.cpu_count() or 1),
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
        for name, watch in [("pipelines", pipelines_load), ("growth", growth_load)]
    }
    report = {"settings": settings, "machine": machine_line, "load": load,
              "pipelines": results_to_json(results),
              "scaling": scale, "seconds": time.perf_counter() - start}  # fmt: skip
    if grain_skipped:
        report["skipped"] = {GRAIN: grain_skipped}
    (args.output_dir / "benchmark.json").write_text(json.dumps(report, indent=2))
    plot(results, scale, args.output_dir / "benchmark.png")
    print("\n".join(lines))
    print(f"\nWrote {args.output_dir / 'benchmark.json'} and {args.output_dir / 'benchmark.png'} "
          f"in {report['seconds']:.0f} s.")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
