"""When each batch of a tf.data pipeline was read, decoded and consumed: measured, then drawn."""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import tensorflow as tf
from matplotlib.figure import Figure

from utils import arguments
from utils.display import MAX_WIDTH_INCHES


@dataclasses.dataclass(frozen=True)
class Timeline:
    """When each batch went through each stage, in seconds from the start of the run.

    Attributes:
        label: what was traced.
        read: per batch, (first, last) time one of its records came out of storage.
        decode: per batch, (start, end) of its parse-and-decode call.
        consume: per batch, (start, end) of the consumer's step on it.
    """

    label: str
    read: list[tuple[float, float]]
    decode: list[tuple[float, float]]
    consume: list[tuple[float, float]]

    @property
    def seconds(self) -> float:
        """Returns when the last step ended."""
        return self.consume[-1][1]

    @property
    def waiting_seconds(self) -> float:
        """Returns how long the consumer waited for data: the time between its steps."""
        ends = [0.0] + [end for _, end in self.consume[:-1]]
        return sum(start - end for (start, _), end in zip(self.consume, ends, strict=True))


class _Stamps:
    """Times at which (stage, batch) events happened, written from tf.data's threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self.times = collections.defaultdict(list)
        self.start = time.perf_counter()

    def add(self, stage: str, batch: int) -> None:
        with self._lock:
            self.times[stage, int(batch)].append(time.perf_counter() - self.start)

    def mark(self, stage: str, batch: tf.Tensor, value: tf.Tensor) -> tf.Tensor:
        """Returns `value`, once the time of `stage` for `batch` is recorded."""

        def record(index):
            self.add(stage, index)
            return np.int64(index)

        marked = tf.numpy_function(record, [batch], tf.int64, stateful=True)
        with tf.control_dependencies([marked]):
            return tf.nest.map_structure(tf.identity, value)


def trace_pipeline(
    records: tf.data.Dataset,
    parse_batch: Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]],
    *,
    batch_size: int,
    num_batches: int,
    step_ms: float,
    parallel: bool,
    label: str,
) -> Timeline:
    """Runs a pipeline over `records` and records when each batch passed each stage.

    The pipeline batches the records, maps `parse_batch` over each batch, and hands the
    batches to a consumer that takes `step_ms` per batch, as an accelerator's training
    step would. With `parallel`, the map runs with `num_parallel_calls=tf.data.AUTOTUNE`
    and the result is prefetched; without, each stage waits for the one after it.

    Args:
        records: serialized records, as storage gives them (read in parallel or not).
        parse_batch: serialized batch -> (images, labels).
        batch_size: records per batch.
        num_batches: batches to trace.
        step_ms: the consumer's time per batch, in milliseconds.
        parallel: parallel map and prefetch, or neither.
        label: the timeline's name.

    Returns:
        A `Timeline` of `num_batches` batches.

    Raises:
        ValueError: if `num_batches` or `batch_size` is not positive, or the records run
            out before `num_batches` batches.

    Example:
        slow = pipeline_trace.trace_pipeline(records, parse_batch, batch_size=32, num_batches=10,
                                       step_ms=50, parallel=False, label="slow")
    """
    for name, value in (("num_batches", num_batches), ("batch_size", batch_size)):
        arguments.check_integer(name, value, 1)
    stamps = _Stamps()
    numbered = records.take(num_batches * batch_size).enumerate()
    numbered = numbered.map(lambda i, r: (i // batch_size, stamps.mark("read", i // batch_size, r)))

    def decode(batch_ids, serialized):
        batch = batch_ids[0]
        serialized = stamps.mark("decode", batch, serialized)
        return batch, stamps.mark("decode", batch, parse_batch(serialized))

    batches = numbered.batch(batch_size)
    calls = tf.data.AUTOTUNE if parallel else None
    batches = batches.map(decode, num_parallel_calls=calls)
    if parallel:
        batches = batches.prefetch(tf.data.AUTOTUNE)
    else:
        # tf.data would otherwise add a prefetch of its own at the end.
        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False
        options.experimental_optimization.map_parallelization = False
        batches = batches.with_options(options)
    stamps.start = time.perf_counter()
    for batch, _ in batches:
        stamps.add("consume", batch)
        time.sleep(step_ms / 1000)
        stamps.add("consume", batch)
    indices = sorted({batch for stage, batch in stamps.times if stage == "consume"})
    if len(indices) < num_batches:
        raise ValueError(
            f"The records ran out after {len(indices)} batches; asked for {num_batches}."
        )

    def spans(stage):
        return [(min(stamps.times[stage, b]), max(stamps.times[stage, b])) for b in indices]

    return Timeline(label, spans("read"), spans("decode"), spans("consume"))


def plot_timelines(
    timelines: Sequence[Timeline],
    *,
    title: str = "When each batch was read, decoded and consumed",
) -> Figure:
    """Draws measured pipeline timelines side by side: one row per batch, time across.

    Args:
        timelines: `Timeline`s, drawn left to right on one time axis.
        title: the figure's title.

    Returns:
        The matplotlib Figure (at most 10 inches wide: 1,000 pixels at 100 dpi).

    Raises:
        ValueError: if `timelines` is empty.

    Example:
        pipeline_trace.plot_timelines([slow_timeline, fast_timeline])
    """
    if not timelines:
        raise ValueError("`timelines` must hold at least one Timeline. Received: []")
    num_batches = max(len(timeline.consume) for timeline in timelines)
    figure, axes = plt.subplots(
        1,
        len(timelines),
        figsize=(MAX_WIDTH_INCHES, 1.4 + 0.22 * num_batches),
        sharex=True,
        squeeze=False,
    )
    stages = (("read", "tab:blue"), ("decode", "tab:orange"), ("consume", "tab:green"))
    for axis, timeline in zip(axes.flat, timelines, strict=True):
        for stage, color in stages:
            spans = getattr(timeline, stage)
            bars = [(start, max(end - start, 0.002)) for start, end in spans]
            for row, bar in enumerate(bars):
                axis.broken_barh(
                    [bar], (row - 0.35, 0.7), color=color, label=stage if not row else None
                )
        for row, ((_, decoded), (consumed, _)) in enumerate(
            zip(timeline.decode, timeline.consume, strict=True)
        ):
            axis.plot([decoded, consumed], [row, row], color="0.6", linewidth=1, zorder=0)
        axis.set_ylim(len(timeline.consume) - 0.5, -0.5)
        axis.set_ylabel("batch", fontsize=9)
        axis.set_xlabel("seconds from the start", fontsize=9)
        axis.set_title(f"{timeline.label}: {timeline.seconds:.2f} s", fontsize=10)
        axis.tick_params(labelsize=8)
    # Batches run from the top left to the bottom right: the top right is empty.
    axes.flat[0].legend(loc="upper right", fontsize=8)
    figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    return figure
