"""Benchmarks "decode less": random crops decoded whole, decoded alone, or decoded at 1/2.

Steps:
1. Reads `--num-images` records of the course's shards into memory (the embedded
   dataset's 192 px shards, written first if need be, or the shards in `--shards-dir`),
   so that reading is not what is timed. With `--jpeg-source`, reads the JPEG files of a
   source instead (`"embedded"`: the originals lab 2 shrank to 192 px; or a folder), to
   see what the crop saves on larger images, as on ImageNet.
2. Makes lesson 5's random crops at `--image-size` from them, three ways
   (`decode_less.VARIANTS`, lesson 5's): decode the whole JPEG then crop; decode only the crop
   (`tf.io.decode_and_crop_jpeg`); decode at half size (`decode_jpeg(ratio=2)`) then crop.
3. Times each `--repeats` times, in turns (`comparison.measure_in_turns`), and prints the
   median images/s with its min-max, whether the machine was idle, and each way's
   speed-up over decode-then-crop, divided within each round (`comparison.ratio_in_turns`),
   against the target (1.5x).

Usage:
    python -m tools.benchmark decode                  # about a minute on 2 cores
    python -m tools.benchmark decode --shards-dir DIR --num-images 200 --repeats 5
    python -m tools.benchmark decode --jpeg-source embedded   # the larger originals
"""

from __future__ import annotations

import argparse
import io
import os
from pathlib import Path

from PIL import Image

from tools.building import machine

TARGET_RATIO = 1.5
DATASET_SIZE = 3670  # The embedded dataset, as in lesson 5.
TARGET_SIZE = 192  # Lesson 5's shards (lab 2's).
NUM_SHARDS = 16


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer; got {text}")
    return value


def parse_arguments(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tools.benchmark decode", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--shards-dir",
        help="a folder of TFRecord shards (default: the "
        "embedded dataset's 192 px shards, written if missing)",
    )
    parser.add_argument(
        "--jpeg-source",
        help="read JPEG files instead of shards: "
        '"embedded" (the originals) or a folder of class folders',
    )
    parser.add_argument(
        "--num-images",
        type=_positive_int,
        default=2000,
        help="records read into memory (default 2000)",
    )
    parser.add_argument(
        "--timed-images",
        type=_positive_int,
        default=4000,
        help="images timed per run (default 4000)",
    )
    parser.add_argument(
        "--repeats",
        type=_positive_int,
        default=5,
        help="alternating runs of each variant (default 5)",
    )
    parser.add_argument(
        "--image-size",
        type=_positive_int,
        default=96,
        help="output side in pixels (default 96, lesson 5's)",
    )
    parser.add_argument("--batch-size", type=_positive_int, default=64)
    return parser.parse_args(argv)


def read_jpeg_files(data_source: str, num_images: int) -> list[bytes]:
    """Returns the bytes of the first `num_images` JPEG files of a source (not PNGs)."""
    from utils.lab import sources

    source = sources.resolve_source(data_source, num_images=DATASET_SIZE, seed=42)
    paths = [path for path in source.paths if path.lower().endswith((".jpg", ".jpeg"))]
    if not paths:
        raise FileNotFoundError(f"No JPEG files in {data_source}.")
    return [Path(path).read_bytes() for path in paths[:num_images]]


def read_encoded_images(shards_dir: str | None, num_images: int) -> list[bytes]:
    """Returns the JPEG bytes of the first `num_images` records of the shards."""
    import tensorflow as tf

    from utils import records, shard_files
    from utils.lab import shard_cache, sources

    if shards_dir is None:
        source = sources.resolve_source("embedded", num_images=DATASET_SIZE, seed=42)
        shards_dir = shard_cache.ensure_shards(
            source, None, target_size=TARGET_SIZE, num_shards=NUM_SHARDS, seed=42
        ).output_dir
    paths = shard_files.find_shards(shards_dir)
    if not paths:
        raise FileNotFoundError(f"No TFRecord shards in {shards_dir}. Write them with lab 2.")
    serialized = tf.data.TFRecordDataset(paths).take(num_images)
    return [records.parse_record(record)["image"].numpy() for record in serialized]


def main(argv=None) -> int:
    arguments = parse_arguments(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from utils import comparison, machine_load, random_crops
    from utils.lessons.accelerator_waiting import decode_less

    if arguments.jpeg_source:
        encoded_images = read_jpeg_files(arguments.jpeg_source, arguments.num_images)
    else:
        encoded_images = read_encoded_images(arguments.shards_dir, arguments.num_images)
    sides = sorted(max(Image.open(io.BytesIO(jpeg)).size) for jpeg in encoded_images)
    print(
        f"{len(encoded_images)} JPEGs in memory (longer side {sides[0]}-{sides[-1]} px, "
        f"median {sides[len(sides) // 2]}); random crops at {arguments.image_size} px, "
        f"batches of {arguments.batch_size}; {machine.describe_machine()}"
    )
    datasets = {
        label: random_crops.random_crop_batches(
            encoded_images,
            decode,
            image_size=arguments.image_size,
            batch_size=arguments.batch_size,
        )
        for label, decode in decode_less.VARIANTS.items()
    }
    with machine_load.LoadWatch() as load:
        runs = comparison.measure_in_turns(
            datasets, num_images=arguments.timed_images, repeats=arguments.repeats
        )
    print(load.summary())
    for label in list(decode_less.VARIANTS)[1:]:
        ratio = comparison.ratio_in_turns(runs[label], runs[decode_less.BASELINE])
        verdict = "meets" if ratio.median >= TARGET_RATIO else "misses"
        print(f"Target: {ratio.summary('.2f')}; {verdict} the {TARGET_RATIO}x target.")
    return 0
