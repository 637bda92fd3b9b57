"""What the course benchmark compares: its settings, the pipelines' names, the targets."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

REPO_ROOT = Path(__file__).resolve().parents[2]


LATENCIES_MS = (0, 50)


TARGET_SIZE = 192


BATCH_SIZE = 64


NUM_PARALLEL_READS = 16


NUM_SHARDS = 16  # Of the pipelines' data and of each growth size.


NUM_CLASSES = 5  # The embedded flowers' classes.


# `grain_decoders`: the JPEG decoders Grain at its best is chosen among (`grain_best`).
FULL = dict(
    num_images=3670,
    headline_repeats=7,
    repeats=3,
    sizes=[1000, 4000, 16000],
    shard_counts=[4, 16, 64],
    timed=8000,
    headline_warmup_batches=125,  # 8,000 images, not timed, before each headline run.
    timed_files=400,
    timed_sequential=40,
    grain_decoders=["pillow", "tensorflow"],
)


# Quick: every row, on few images. Drawing and converting 300, 200 and 400 embedded images took
# about half its time: now 160 and 100, the sizes the tests' small lessons draw (in the same
# cache in a test session), the pipelines' 160 also the largest growth size; 300 images a
# timed run.
QUICK = dict(
    num_images=160,
    headline_repeats=2,
    repeats=1,
    sizes=[100, 160],
    shard_counts=[2, 4],
    timed=300,
    headline_warmup_batches=2,
    timed_files=60,
    timed_sequential=6,
    grain_decoders=["pillow"],
)


# Measured in turns with the ceiling, `headline_repeats` rounds: the ratios that are quoted.
FILES_ONE_AT_A_TIME = "files, one at a time"


FILES_IN_FLIGHT = f"files, {NUM_PARALLEL_READS} in flight"


FROM_DIRECTORY = "image_dataset_from_directory"


ORIGINAL = "original course TFRecords"


COURSE = "course pipeline"


GRAIN = "Grain + ArrayRecord"


GRAIN_PER_RECORD = "Grain, a request per record"


# Grain in worker processes, with the worker count and decoder that read fastest here.
GRAIN_BEST = "Grain at its best"


HEADLINE = (ORIGINAL, COURSE, GRAIN, GRAIN_BEST)


class Row(NamedTuple):
    """What one result measured: a pipeline, at a simulated latency (None: no I/O at all).

    `cores`: the cores its process was pinned to (`cores.by_cores`); None: all of them.
    """

    pipeline: str
    latency_ms: int | None = None
    cores: int | None = None

    @property
    def label(self) -> str:
        """The row's name in the table and in `benchmark.json`: `pipeline @ N ms on C cores`."""
        label = (
            self.pipeline if self.latency_ms is None else f"{self.pipeline} @ {self.latency_ms} ms"
        )
        if self.cores is None:
            return label
        return f"{label} on {self.cores} core{'s' if self.cores > 1 else ''}"


CEILING = Row("decode ceiling (no I/O)")


# The targets for the course pipeline.
TARGET_SHARE_OF_CEILING = {0: 0.95, 50: 0.9}  # Its images/s / the ceiling's, by latency (ms).


TARGET_SPREAD = 0.05  # That share's range around its median, either side.


TARGET_OVER_ORIGINAL = 1.3  # Its images/s / the original course's, at the first latency.


TARGET_LATENCY_RATIO = 0.97  # Its images/s at the last latency / at the first.


TARGET_OVER_FROM_DIRECTORY = 10  # Its images/s / image_dataset_from_directory's, last latency.


def counts_up_to(num_cores: int) -> list[int]:
    """Returns 1, 2, 4, ... below `num_cores`, then `num_cores`: the worker and core counts."""
    if num_cores < 1:
        raise ValueError(f"`num_cores` must be >= 1. Received: num_cores={num_cores}")
    counts, count = [], 1
    while count < num_cores:
        counts.append(count)
        count *= 2
    return counts + [num_cores]
