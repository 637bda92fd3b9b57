"""Where the course pipeline's time goes against the decode ceiling, and what could close the gap.

Three measurements on the benchmark's data (3,670 embedded images in 16 shards of 192 px,
local disk), each in one run with its candidates measured in turns
(`comparison.measure_in_turns`) and the machine's load printed:

1. `stages`: the pipeline built up stage by stage: read (TFRecord files, CRC checked),
   + parse (`parse_example` by batch), + decode (the JPEGs: the pipeline without
   prefetch), + prefetch (the course pipeline), beside the ceiling (the same JPEG bytes
   decoded from memory). For each: images/s, and this process's CPU time per image,
   which adds up across stages even when they run in parallel, and the cores kept busy
   (CPU time / wall time). The pipeline's rate / the ceiling's is then
   (cores busy, pipeline / ceiling) x (CPU per image, ceiling / pipeline): lost to idle
   cores (waits, contention) or to extra work (reading, parsing). Saves a figure.
2. `sweep`: each candidate change to the pipeline against the course pipeline, in turns,
   its ratio taken within each round; `dct_method="INTEGER_FAST"` also against a ceiling
   that decodes the same way.
3. `shards`: the images written in 4, 16 and 64 shards, each read right after writing
   and again after `sync` and a pause, in turns, to explain the shard-count row.

Usage:
    python -m tools.profile_pipeline stages   # about 2 minutes on 2 cores (cache warm)
    python -m tools.profile_pipeline sweep    # about 5 minutes
    python -m tools.profile_pipeline shards --repeats 3   # about 10 minutes
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import textwrap
import time
from pathlib import Path

from tools import machine
from tools.course_benchmark import growth
from utils import progress

REPO_ROOT = Path(__file__).resolve().parents[1]
TARGET_SIZE = 192
BATCH_SIZE = 64
NUM_IMAGES = 3670
NUM_TIMED = 8000
SETTLE_SECONDS = 30  # The kernel writes dirty pages back after 30 s (dirty_expire_centisecs).
NUM_SWEEP = 4000  # Images per run in the sweep: two candidates or four per change.
STAGES = ["read", "+ parse", "+ decode", "+ prefetch (course pipeline)"]


def _quietly(function, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):
        return function(*args, **kwargs)


def load_shards(num_images: int = NUM_IMAGES, num_shards: int = 16):
    """Returns the benchmark's shard paths, the number of classes and 1000 stored JPEGs."""
    import tensorflow as tf

    from utils import records, shard_cache, sources

    source = sources.resolve_source("embedded", num_images=num_images)
    shard_set = _quietly(
        shard_cache.ensure_shards, source, target_size=TARGET_SIZE, num_shards=num_shards
    )
    paths = shard_set.paths
    jpegs = [
        records.parse_record(record)["image"].numpy()
        for record in tf.data.TFRecordDataset(paths).take(1000)
    ]
    return paths, len(shard_set.class_names), jpegs


def build(
    paths,
    *,
    num_classes: int,
    stage: str = STAGES[-1],
    cycle_length: int = 16,
    block_length: int | None = None,
    decode_calls=None,
    parse_batch: int = BATCH_SIZE,
    buffer_size: int | None = None,
    threads: int | None = None,
    intra_op: int | None = None,
    optimization: dict | None = None,
    dct_method: str = "",
    target_size: int = TARGET_SIZE,
):
    """The course pipeline (`pipeline.tfrecord_images`, local disk) with one knob changed.

    With the defaults it is the course pipeline. `stage` stops it after one of STAGES;
    `block_length` reads through an explicit `interleave` of one `TFRecordDataset` per
    file; `decode_calls` fixes the parse-and-decode map's parallelism (default AUTOTUNE);
    `parse_batch` is the records per parse (and per output batch); `threads` and
    `intra_op` set `options.threading`; `optimization` sets
    `options.experimental_optimization` attributes.
    """
    import tensorflow as tf

    from utils import records

    autotune = tf.data.AUTOTUNE
    if block_length is None:
        serialized = tf.data.TFRecordDataset(
            paths, num_parallel_reads=cycle_length, buffer_size=buffer_size
        )
    else:
        serialized = tf.data.Dataset.from_tensor_slices(paths).interleave(
            lambda path: tf.data.TFRecordDataset(path, buffer_size=buffer_size),
            cycle_length=cycle_length,
            block_length=block_length,
            num_parallel_calls=cycle_length,
            deterministic=False,
        )
    options = tf.data.Options()
    options.deterministic = False
    if threads is not None:
        options.threading.private_threadpool_size = threads
    if intra_op is not None:
        options.threading.max_intra_op_parallelism = intra_op
    for name, value in (optimization or {}).items():
        setattr(options.experimental_optimization, name, value)
    batches = serialized.with_options(options).batch(parse_batch)
    if stage == STAGES[0]:
        return batches.repeat()

    def parse(batch):
        return tf.io.parse_example(batch, records.FEATURES)

    def parse_and_decode(batch):
        parsed = parse(batch)
        images = tf.map_fn(
            lambda jpeg: tf.reshape(
                tf.io.decode_jpeg(jpeg, channels=3, dct_method=dct_method),
                [target_size, target_size, 3],
            ),
            parsed["image"],
            fn_output_signature=tf.uint8,
        )
        labels = tf.reshape(tf.sparse.to_dense(parsed["one_hot_class"]), [-1, num_classes])
        return images, labels

    if stage == STAGES[1]:
        return batches.map(parse, num_parallel_calls=autotune).map(lambda r: r["image"]).repeat()
    dataset = batches.map(parse_and_decode, num_parallel_calls=decode_calls or autotune)
    if stage == STAGES[2]:
        return dataset.repeat()
    return dataset.prefetch(autotune).repeat()


def ceiling(jpegs, *, dct_method: str = ""):
    """The decode ceiling (`pipeline.decode_ceiling_dataset`), with a choice of DCT method."""
    import tensorflow as tf

    from utils import pipeline

    if not dct_method:
        return pipeline.decode_ceiling_dataset(jpegs, batch_size=BATCH_SIZE)
    batches = tf.data.Dataset.from_tensor_slices(jpegs).repeat().batch(BATCH_SIZE)
    return batches.map(
        lambda batch: tf.map_fn(
            lambda jpeg: tf.io.decode_jpeg(jpeg, channels=3, dct_method=dct_method),
            batch,
            fn_output_signature=tf.uint8,
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
    )


def time_with_cpu(dataset, num_images: int, cpu_log: list):
    """Times `dataset` after one warm-up element; logs CPU seconds per image; returns images/s."""
    from utils import timing

    iterator = iter(dataset)
    next(iterator)
    counted = 0
    cpu_start, start = time.process_time(), time.perf_counter()
    for element in iterator:
        counted += timing._count_images(element)
        if counted >= num_images:
            break
    seconds = time.perf_counter() - start
    cpu_log.append((time.process_time() - cpu_start) / counted)
    return counted / seconds


def stages(repeats: int, output_dir: Path) -> dict:
    """Measures the pipeline stage by stage beside the ceiling; saves `stages.png`."""
    import statistics

    import tensorflow as tf

    from utils import comparison, machine_load

    paths, num_classes, jpegs = load_shards()
    makers = {
        stage: (lambda s=stage: build(paths, num_classes=num_classes, stage=s)) for stage in STAGES
    }
    makers["decode ceiling (no I/O)"] = lambda: ceiling(jpegs)
    # The ceiling has no prefetch: this shows whether it leaves cores idle without one.
    makers["decode ceiling + prefetch"] = lambda: ceiling(jpegs).prefetch(tf.data.AUTOTUNE)
    cpu = {name: [] for name in makers}
    rates = {
        name: (lambda n=name: time_with_cpu(makers[n](), NUM_TIMED, cpu[n])) for name in makers
    }
    with machine_load.LoadWatch() as load:
        measured = comparison.measure_in_turns(rates, repeats=repeats)
    cores = len(os.sched_getaffinity(0))
    report = {"load": load.summary(), "machine": machine.describe_machine(), "stages": {}}
    for name, result in measured.items():
        cpu_us = statistics.median(cpu[name]) * 1e6
        report["stages"][name] = {
            "images_per_second": result.median,
            "min": result.minimum,
            "max": result.maximum,
            "runs": list(result.values),
            "cpu_us_per_image": cpu_us,
            "cores_busy": result.median * cpu_us / 1e6,
        }
    full, top = report["stages"][STAGES[-1]], report["stages"]["decode ceiling (no I/O)"]
    report["decomposition"] = {
        "rate_ratio": full["images_per_second"] / top["images_per_second"],
        "busy_ratio": full["cores_busy"] / top["cores_busy"],
        "work_ratio": top["cpu_us_per_image"] / full["cpu_us_per_image"],
        "cores": cores,
    }
    lines = [
        f"{'stage':<30} {'images/s':>9} {'min-max':>13} {'CPU us/image':>12} {'cores busy':>10}"
    ]
    for name, figures in report["stages"].items():
        spread = f"{figures['min']:,.0f}-{figures['max']:,.0f}"
        lines.append(
            f"{name:<30} {figures['images_per_second']:>9,.0f} {spread:>13} "
            f"{figures['cpu_us_per_image']:>12.0f} {figures['cores_busy']:>10.2f}"
        )
    parts = report["decomposition"]
    lines.append(
        f"course pipeline / ceiling: {parts['rate_ratio']:.2f} = cores busy "
        f"{parts['busy_ratio']:.2f} x CPU work per image {parts['work_ratio']:.2f} "
        f"(medians of {repeats} runs in turns)"
    )
    report["lines"] = lines
    plot_stages(report, output_dir / "stages.png")
    return report


def plot_stages(report: dict, path: Path) -> None:
    """Saves CPU time per image by stage (pipeline vs ceiling) and cores busy, 960 px wide."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = report["stages"]
    costs = [figures[STAGES[0]]["cpu_us_per_image"]] + [
        figures[b]["cpu_us_per_image"] - figures[a]["cpu_us_per_image"]
        for a, b in zip(STAGES, STAGES[1:], strict=False)
    ]
    names = ["read + CRC", "parse", "decode + batch", "prefetch"]
    figure, (work, busy) = plt.subplots(1, 2, figsize=(9.6, 4.2), width_ratios=[2, 1])
    left = 0.0
    for name, cost, color in zip(names, costs, plt.colormaps["tab10"].colors, strict=False):
        # A stage that measured below zero is noise: drawn as nothing, labelled as measured.
        label = f"{name}: {cost:.0f}" + (" (noise)" if cost < 0 else "")
        work.barh("course pipeline", max(cost, 0.0), left=left, color=color, label=label)
        left += max(cost, 0.0)
    work.barh(
        "decode ceiling",
        figures["decode ceiling (no I/O)"]["cpu_us_per_image"],
        color="black",
        label="ceiling: decode + batch",
    )
    work.set_xlabel("CPU time per image (microseconds, all threads)")
    work.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3)
    work.set_title("Work per image")
    labels = ["course pipeline", "decode ceiling"]
    cores = [figures[STAGES[-1]]["cores_busy"], figures["decode ceiling (no I/O)"]["cores_busy"]]
    busy.barh(labels, cores, color=["tab:blue", "black"])
    busy.axvline(report["decomposition"]["cores"], color="tab:red", linestyle="--")
    busy.set_xlabel("cores busy (CPU time / wall time)")
    busy.set_title("Cores kept busy")
    busy.invert_yaxis()
    work.invert_yaxis()
    figure.suptitle(textwrap.fill(report["load"], 150), fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


SWEEP = {
    "interleave block_length=16": {"block_length": 16},
    "interleave block_length=64": {"block_length": 64},
    "num_parallel_reads=2": {"cycle_length": 2},
    "num_parallel_reads=4": {"cycle_length": 4},
    "decode map: 1 call at a time": {"decode_calls": 1},
    "decode map: 2 calls at a time": {"decode_calls": 2},
    "decode map: 4 calls at a time": {"decode_calls": 4},
    "parse batch 32": {"parse_batch": 32},
    "parse batch 128": {"parse_batch": 128},
    "parse batch 256": {"parse_batch": 256},
    "TFRecordDataset buffer 1 MB": {"buffer_size": 1 << 20},
    "TFRecordDataset buffer 8 MB": {"buffer_size": 8 << 20},
    "private_threadpool_size=2": {"threads": 2},
    "private_threadpool_size=4": {"threads": 4},
    "max_intra_op_parallelism=1": {"intra_op": 1},
    "map_parallelization off": {"optimization": {"map_parallelization": False}},
    "inject_prefetch off": {"optimization": {"inject_prefetch": False}},
    "parallel_batch on": {"optimization": {"parallel_batch": True}},
    "dct_method=INTEGER_FAST": {"dct_method": "INTEGER_FAST"},
}


def sweep(repeats: int, names: list[str] | None = None) -> dict:
    """Measures each SWEEP change against the course pipeline, in turns; returns ratios.

    Two ratios each, within each round: images/s (change / course pipeline) and work, the
    course pipeline's CPU time per image / the change's (above 1: less work per image).
    On a loaded machine the first is noisy; the second moves far less with the load.
    """
    import statistics

    from utils import comparison, machine_load

    paths, num_classes, jpegs = load_shards()
    course = lambda: build(paths, num_classes=num_classes)  # noqa: E731
    report = {"machine": machine.describe_machine(), "changes": {}}
    with machine_load.LoadWatch() as load:
        for name in names or list(SWEEP):
            change = SWEEP[name]
            print(f"{name}:", flush=True)
            makers = {
                "course pipeline": course,
                name: lambda c=change: build(paths, num_classes=num_classes, **c),
            }
            if "dct_method" in change:
                makers["ceiling"] = lambda: ceiling(jpegs)
                makers["ceiling, same dct_method"] = lambda c=change: ceiling(
                    jpegs, dct_method=c["dct_method"]
                )
            cpu = {label: [] for label in makers}
            candidates = {
                label: (lambda m=make, log=cpu[label]: time_with_cpu(m(), NUM_SWEEP, log))
                for label, make in makers.items()
            }
            measured = comparison.measure_in_turns(candidates, repeats=repeats)
            gain = comparison.ratio_in_turns(measured[name], measured["course pipeline"])
            work = [a / b for a, b in zip(cpu["course pipeline"], cpu[name], strict=True)]
            entry = {
                "ratio": gain.median,
                "min": gain.minimum,
                "max": gain.maximum,
                "runs": gain.num_runs,
                "work_ratio": statistics.median(work),
                "work_min": min(work),
                "work_max": max(work),
            }
            if "dct_method" in change:
                same = comparison.ratio_in_turns(
                    measured[name], measured["ceiling, same dct_method"]
                )
                entry["share_of_same_ceiling"] = same.median
                entry["ceiling_gain"] = comparison.ratio_in_turns(
                    measured["ceiling, same dct_method"], measured["ceiling"]
                ).median
            report["changes"][name] = entry
    report["load"] = load.summary()
    lines = [
        f"{'change':<32} {'/ course':>8} {'min-max':>11}  {'work':>5} {'min-max':>11}  verdict"
    ]
    for name, entry in report["changes"].items():
        verdict = _verdict(entry["min"], entry["max"])
        work = _verdict(entry["work_min"], entry["work_max"])
        lines.append(
            f"{name:<32} {entry['ratio']:>8.2f} {entry['min']:.2f}-{entry['max']:.2f}  "
            f"{entry['work_ratio']:>5.2f} {entry['work_min']:.2f}-{entry['work_max']:.2f}  "
            f"images/s: {verdict}; work: {work}"
        )
        if "share_of_same_ceiling" in entry:
            lines.append(
                f"{'':<32} its ceiling {entry['ceiling_gain']:.2f}x the usual one; "
                f"the change reaches {entry['share_of_same_ceiling']:.2f} of it"
            )
    report["lines"] = lines
    return report


def _verdict(low: float, high: float) -> str:
    """Says whether a ratio's range (to the course pipeline) is all above 1, all below, or not."""
    return "helps" if low > 1 else "hurts" if high < 1 else "within the spread"


def shards(repeats: int, counts=(4, 16, 64), num_images: int = NUM_IMAGES) -> dict:
    """Reads the images in each shard count right after writing them, and again once settled.

    Each round, for each count in turns: convert the images into that many shards (a
    temporary folder), read one epoch in a process of its own at once ("just written"),
    then `sync`, wait `SETTLE_SECONDS`, and read the same shards again ("settled"). The
    benchmark's shard-count row used to read counts it had just written beside one it
    had not; this separates the two effects: the count itself, and reading fresh writes.
    """
    import shutil
    import statistics
    import tempfile

    from utils import comparison, conversion, machine_load, sources

    source = sources.resolve_source("embedded", num_images=num_images)

    def read(directory):  # In a process of its own, as the benchmark reads.
        return growth.read_in_own_process(str(directory))["images_per_second"]

    runs = {count: {"just written": [], "settled": []} for count in counts}
    sizes = {}
    with machine_load.LoadWatch() as load, tempfile.TemporaryDirectory() as scratch:
        for round_index in range(repeats):
            for count in counts if round_index % 2 == 0 else counts[::-1]:
                directory = Path(scratch) / f"{count}-shards"
                _quietly(conversion.convert, source, directory, target_size=TARGET_SIZE,
                         num_shards=count)  # fmt: skip
                runs[count]["just written"].append(read(directory))
                os.sync()
                time.sleep(SETTLE_SECONDS)
                runs[count]["settled"].append(read(directory))
                files = list(directory.glob("*.tfrec"))
                sizes[count] = sum(path.stat().st_size for path in files) / len(files) / 1e6
                shutil.rmtree(directory)  # Our own temporary folder.
                print(f"  round {round_index + 1}, {count} shards: {runs[count]}", flush=True)
    lines = [
        f"{num_images} images; {repeats} rounds; images/s, median (min-max)",
        f"{'shards':>6} {'MB/shard':>8} {'just written':>22} {'settled':>22} {'settled/just':>12}",
    ]
    for count in counts:
        fresh, settled = runs[count]["just written"], runs[count]["settled"]
        gain = statistics.median(b / a for a, b in zip(fresh, settled, strict=True))
        lines.append(
            f"{count:>6} {sizes[count]:>8.1f} {comparison.spread(fresh):>22} "
            f"{comparison.spread(settled):>22} {gain:>12.2f}"
        )
    return {"load": load.summary(), "lines": lines, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["stages", "sweep", "shards"])
    parser.add_argument("--repeats", type=int, default=5, help="rounds in turns (default 5)")
    parser.add_argument("--num-images", type=int, default=NUM_IMAGES, help="shards: images")
    parser.add_argument("--only", nargs="*", help="sweep: these changes only (names in SWEEP)")
    parser.add_argument("--output-dir", type=Path, default=REPO_ROOT / "build" / "profile")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault(progress.DISABLE_ENV_VAR, "1")
    unknown = sorted(set(args.only or []) - set(SWEEP))
    if unknown:
        parser.error(f"--only: unknown change(s) {unknown}; choose from {list(SWEEP)}")
    args.output_dir.mkdir(parents=True, exist_ok=True)

    print(f"Machine: {machine.describe_machine()}", flush=True)
    start = time.perf_counter()
    if args.what == "stages":
        report = stages(args.repeats, args.output_dir)
    elif args.what == "sweep":
        report = sweep(args.repeats, args.only)
    else:
        report = shards(args.repeats, num_images=args.num_images)
    report["seconds"] = time.perf_counter() - start
    print("\n".join([report["load"], "", *report["lines"]]))
    path = args.output_dir / f"{args.what}.json"
    path.write_text(json.dumps(report, indent=2))
    print(f"\nWrote {path} in {report['seconds']:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
