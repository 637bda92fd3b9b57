"""Throughput measurement: images per second, warm-up excluded, repeated in turns."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import os
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import tensorflow as tf

from utils import arguments

if TYPE_CHECKING:
    import keras

    from utils.storage import SimulatedStorage


@dataclasses.dataclass(frozen=True)
class ThroughputResult:
    """One throughput measurement.

    Attributes:
        label: what was measured.
        num_images: images timed (warm-up excluded).
        seconds: time taken by those images.
        images_per_second: `num_images / seconds`.
        megabytes_per_second: bytes read from storage per second, in MB (1e6 bytes);
            None when no storage was given.
        warmup_seconds: time taken by the warm-up elements, not counted above.
        cpu_seconds: CPU time this process (all its threads) used while the images
            were timed: the work they took, which moves far less than `seconds` when
            other work shares the machine. None when not measured.
    """

    label: str
    num_images: int
    seconds: float
    images_per_second: float
    megabytes_per_second: float | None
    warmup_seconds: float
    cpu_seconds: float | None = None

    def summary(self) -> str:
        """Returns the one-line summary that `measure_throughput` prints.

        Returns:
            The label, images/s (and MB/s when measured), the images timed and the
            warm-up.
        """
        rate = f"{self.images_per_second:.1f} images/s"
        if self.megabytes_per_second is not None:
            rate += f", {self.megabytes_per_second:.1f} MB/s"
        label = f"{self.label}: " if self.label else ""
        return (
            f"{label}Throughput: {rate} ({self.num_images} images; "
            f"warm-up {self.warmup_seconds:.1f} s excluded)"
        )


def _count_images(element) -> int:
    """Returns how many images an element holds, from its first component.

    A string scalar or a rank-3 image is one image; a string vector or a rank-4 batch of
    images holds as many as its leading dimension.
    """
    first = tf.nest.flatten(element)[0]
    batched_rank = 1 if first.dtype == tf.string else 4
    return int(first.shape[0]) if first.shape.rank == batched_rank else 1


def measure_throughput(
    dataset: tf.data.Dataset,
    *,
    num_images: int,
    num_warmup_elements: int = 1,
    storage: SimulatedStorage | None = None,
    label: str = "",
) -> ThroughputResult:
    """Times how fast `dataset` yields images, after a warm-up that is not counted.

    Args:
        dataset: yields images or encoded images, alone or in (image, label) pairs,
            one at a time or in batches.
        num_images: how many images to time after the warm-up. Timing stops at the first
            element that reaches it, or when the dataset ends.
        num_warmup_elements: elements read first and not timed (pipeline start-up).
        storage: a `storage.SimulatedStorage`; when given, MB/s read from it is reported.
        label: a name for the result, printed with it.

    Returns:
        A `ThroughputResult`; its summary line is also printed.

    Raises:
        ValueError: if the counts are not positive, or the dataset ends during warm-up.

    Example:
        result = timing.measure_throughput(dataset, num_images=200, label="parallel")
        print(result.images_per_second)
    """
    if not isinstance(dataset, tf.data.Dataset):
        raise ValueError(f"`dataset` must be a tf.data.Dataset. Received: {type(dataset)}")
    arguments.check_integer("num_images", num_images, 1)
    arguments.check_integer("num_warmup_elements", num_warmup_elements, 0)
    iterator = iter(dataset)
    start = time.perf_counter()
    for index in range(num_warmup_elements):
        if next(iterator, None) is None:
            raise ValueError(
                f"The dataset ended after {index} elements, during the warm-up of "
                f"{num_warmup_elements}. Give it more data or fewer warm-up elements."
            )
    warmup_seconds = time.perf_counter() - start

    bytes_before = storage.num_bytes_read if storage is not None else 0
    counted = 0
    start, cpu_start = time.perf_counter(), time.process_time()
    for element in iterator:
        counted += _count_images(element)
        if counted >= num_images:
            break
    seconds = time.perf_counter() - start
    cpu_seconds = time.process_time() - cpu_start
    if counted == 0:
        raise ValueError("The dataset ended right after the warm-up: nothing was timed.")
    megabytes_per_second = None
    if storage is not None:
        megabytes_per_second = (storage.num_bytes_read - bytes_before) / 1e6 / seconds
    result = ThroughputResult(
        label=label,
        num_images=counted,
        seconds=seconds,
        images_per_second=counted / seconds,
        megabytes_per_second=megabytes_per_second,
        warmup_seconds=warmup_seconds,
        cpu_seconds=cpu_seconds,
    )
    print(result.summary())
    return result


def time_training_steps(model: keras.Model, dataset: tf.data.Dataset, *, num_steps: int) -> float:
    """Returns the seconds per training step of `model.fit` on `dataset`, warm-up excluded.

    Fits two epochs of `num_steps` steps and times the second (the first includes tracing
    and compiling the step function). The model's weights change: time a copy if that
    matters.

    Args:
        model: a compiled Keras model.
        dataset: batches to train on, at least `2 * num_steps` of them (or endless).
        num_steps: steps per epoch.

    Returns:
        Seconds per step of the second epoch.

    Raises:
        ValueError: if `num_steps` is not a positive integer.

    Example:
        seconds = timing.time_training_steps(model, train_dataset, num_steps=40)
    """
    import keras  # Imported here: the other helpers do not need Keras.

    arguments.check_integer("num_steps", num_steps, 1)
    epoch_seconds = []

    class EpochTimer(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            epoch_seconds.append(time.perf_counter() - self.start)

    model.fit(
        dataset,
        epochs=2,
        steps_per_epoch=num_steps,
        shuffle=False,  # A tf.data.Dataset brings its own order.
        verbose=0,
        callbacks=[EpochTimer()],
    )
    return epoch_seconds[-1] / num_steps


def spread(values: Iterable[float], number_format: str = ",.0f", *, note: str = "") -> str:
    """Returns runs' median and range in one phrase: `median (min-max)`.

    Args:
        values: one number per run.
        number_format: a format spec for the numbers, such as ",.0f" or ".2f".
        note: put inside the parentheses after the range, as in `median (min-max, note)`.

    Returns:
        The median, then the smallest and largest run in parentheses.
    """
    values = list(values)
    low, high = f"{min(values):{number_format}}", f"{max(values):{number_format}}"
    inside = f"{low}-{high}, {note}" if note else f"{low}-{high}"
    return f"{statistics.median(values):{number_format}} ({inside})"


@dataclasses.dataclass(frozen=True)
class RepeatedResult:
    """One quantity measured several times: its runs, median and range.

    Attributes:
        label: what was measured.
        values: one value per run, in the order the runs were taken.
    """

    label: str
    values: tuple[float, ...]

    @property
    def median(self) -> float:
        """The median of the runs."""
        return statistics.median(self.values)

    @property
    def minimum(self) -> float:
        """The smallest run."""
        return min(self.values)

    @property
    def maximum(self) -> float:
        """The largest run."""
        return max(self.values)

    @property
    def num_runs(self) -> int:
        """How many runs were taken."""
        return len(self.values)

    def summary(self, number_format: str = ",.0f") -> str:
        """Returns the median, range and run count in one line.

        Args:
            number_format: a format spec for the numbers, such as ",.0f" or ".0%".

        Returns:
            `label: median (min-max, N runs)`.
        """
        return f"{self.label}: {spread(self.values, number_format, note=f'{self.num_runs} runs')}"


def measure_in_turns(
    candidates: dict, *, num_images: int | None = None, repeats: int = 5
) -> dict[str, RepeatedResult]:
    """Measures several pipelines in turns, `repeats` rounds, and prints each one's spread.

    Round 1 takes the candidates in the given order, round 2 in reverse, and so on, so
    that a busy moment or a slow drift of a shared machine falls on every side alike.
    Compare them with `ratio_in_turns`, which divides within each round.

    Args:
        candidates: label -> a `tf.data.Dataset` (timed with `measure_throughput`, its
            line not printed) or a function of no arguments that returns images/s.
        num_images: images to time per run of a dataset.
        repeats: rounds (at least 1; 5 or more for a figure that is quoted).

    Returns:
        label -> `RepeatedResult` of images/s, its values in round order.

    Raises:
        ValueError: if `repeats` is not a positive integer, `candidates` is empty, or a
            dataset is given without `num_images`.

    Example:
        runs = timing.measure_in_turns({"ceiling": ceiling, "pipeline": fast},
                                       num_images=4000, repeats=5)
    """
    arguments.check_integer("repeats", repeats, 1)
    if not candidates:
        raise ValueError("`candidates` must name at least one pipeline. Received: {}")
    labels = list(candidates)
    values = {label: [] for label in labels}
    for round_index in range(repeats):
        for label in labels if round_index % 2 == 0 else labels[::-1]:
            values[label].append(_images_per_second(candidates[label], label, num_images))
    results = {label: RepeatedResult(label, tuple(values[label])) for label in labels}
    for result in results.values():
        print(result.summary() + " images/s, taken in turns")
    return results


def throughput_timer(
    dataset: tf.data.Dataset, *, num_images: int, num_warmup_elements: int = 1
) -> Callable[[], float]:
    """Returns a function that times `dataset` once, quietly, and returns its images/s.

    For `measure_in_turns`, when candidates need different image counts or warm-ups.

    Args:
        dataset: as for `measure_throughput` (make it endless with `repeat()` if one
            pass is shorter than the warm-up and `num_images`).
        num_images: images timed per run.
        num_warmup_elements: elements read first and not timed, per run.

    Returns:
        A function of no arguments: each call is one `measure_throughput` run, its line
        not printed.

    Example:
        runs = timing.measure_in_turns({"files": timing.throughput_timer(files, num_images=40),
                                        "shards": timing.throughput_timer(fast, num_images=4000)})
    """

    def run() -> float:
        with contextlib.redirect_stdout(io.StringIO()):
            return measure_throughput(
                dataset, num_images=num_images, num_warmup_elements=num_warmup_elements
            ).images_per_second

    return run


def _images_per_second(candidate, label: str, num_images: int | None) -> float:
    if not isinstance(candidate, tf.data.Dataset):
        return float(candidate())
    if num_images is None:
        raise ValueError(f"`num_images` is needed to time the dataset {label!r}.")
    with contextlib.redirect_stdout(io.StringIO()):
        return measure_throughput(candidate, num_images=num_images, label=label).images_per_second


def ratio_in_turns(
    numerator: RepeatedResult, denominator: RepeatedResult, *, label: str = ""
) -> RepeatedResult:
    """Divides two results of `measure_in_turns` round by round: the ratio's own spread.

    Args:
        numerator: the runs divided.
        denominator: the runs divided by, taken in the same rounds.
        label: the result's label; by default "numerator / denominator".

    Returns:
        A `RepeatedResult` of the ratios, one per round.

    Raises:
        ValueError: if the two results have different numbers of runs.

    Example:
        share = timing.ratio_in_turns(runs["pipeline"], runs["ceiling"])
    """
    if numerator.num_runs != denominator.num_runs:
        raise ValueError(
            f"Both results need the same number of runs. Received: {numerator.num_runs} "
            f"({numerator.label}) and {denominator.num_runs} ({denominator.label})."
        )
    ratios = tuple(a / b for a, b in zip(numerator.values, denominator.values, strict=True))
    return RepeatedResult(label or f"{numerator.label} / {denominator.label}", ratios)


def ranges_separate(faster: RepeatedResult, slower: RepeatedResult) -> bool:
    """Says whether every run of `faster` beat every run of `slower`: the course's rule.

    Args:
        faster: the runs of the setting with the higher median.
        slower: the runs of the setting with the lower median.

    Returns:
        True when the ranges do not overlap (the slowest run of `faster` is above the
        fastest run of `slower`): a difference beyond the noise. False: within the noise.
    """
    return faster.minimum > slower.maximum


def describe_difference(
    results: dict[str, RepeatedResult] | list[RepeatedResult],
    *,
    name: str,
    unit: str = "images/s",
    number_format: str = ",.0f",
) -> str:
    """Compares the fastest and slowest of several settings measured in turns, in one line.

    The verdict follows the course's one rule: "beyond the noise" only when the two
    settings' ranges (min-max over the rounds) do not overlap, else "within the noise".
    Two settings that do not differ at all get separate ranges by chance with
    probability 2 (N!)^2 / (2N)! over N rounds each: 10% at 3 rounds, 0.8% at 5.

    Args:
        results: label -> `RepeatedResult` (or a list of them), from `measure_in_turns`.
        name: what was varied, named at the start of the line.
        unit: the unit of the values.
        number_format: a format spec for the values.

    Returns:
        `name: <fastest> <ratio>x <slowest> (medians ...; ranges ...): beyond the noise.`,
        or the same ending "within the noise".

    Raises:
        ValueError: if fewer than two results are given.

    Example:
        print(timing.describe_difference(runs, name="prefetch"))
    """
    values = list(results.values()) if isinstance(results, dict) else list(results)
    if len(values) < 2:
        raise ValueError(f"`results` must hold at least two settings. Received: {len(values)}")
    slowest, *_, fastest = sorted(values, key=lambda result: result.median)

    def span(result):
        return f"{result.minimum:{number_format}}-{result.maximum:{number_format}}"

    numbers = (
        f"medians {fastest.median:{number_format}} and {slowest.median:{number_format}} {unit}; "
        f"ranges {span(fastest)} and {span(slowest)} over {fastest.num_runs} rounds in turns"
    )
    if ranges_separate(fastest, slowest):
        return (
            f"{name}: {fastest.label} is {fastest.median / slowest.median:.2f}x {slowest.label} "
            f"({numbers}): beyond the noise."
        )
    return (
        f"{name}: {fastest.label} and {slowest.label} differ by "
        f"{fastest.median / slowest.median:.2f}x ({numbers}): the ranges overlap, within the noise."
    )


def describe_share_of_ceiling(share: RepeatedResult, *, name: str = "The pipeline") -> str:
    """Says what share of the decode ceiling `share` (a ratio in turns) is, with its spread.

    A median above 100% is called noise, with the reason: a pipeline that reads, parses and
    decodes the same JPEGs cannot outrun decoding them alone.

    Args:
        share: the pipeline's images/s divided by the ceiling's, in turns.
        name: what the sentence calls the pipeline.

    Returns:
        One or two sentences.

    Example:
        print(timing.describe_share_of_ceiling(share, name="The course pipeline"))
    """
    spread = f"{share.minimum:.0%}-{share.maximum:.0%} over {share.num_runs} runs in turns"
    noise_reason = (
        "a pipeline that reads, parses and decodes the same JPEGs cannot outrun decoding "
        "them alone, so the two sides met different loads (other work on the machine, "
        "or runs too short to average it out)"
    )
    if share.median > 1:
        return (
            f"{name} measured {share.median:.0%} of the decode ceiling ({spread}): noise, "
            f"not a result: {noise_reason}. Measure again on an idle machine."
        )
    sentence = f"{name} reaches {share.median:.0%} of the decode ceiling (median; {spread})."
    if share.maximum > 1:
        sentence += f" Runs above 100% are noise: {noise_reason}."
    return sentence


# More than this share of the cores busy with other processes during a measurement makes
# it "not idle": a tenth of the CPU taken from one side of a ratio moves it by up to
# 0.1, twice the +-0.05 spread the benchmark's target allows.
NOT_IDLE_SHARE = 0.1


def describe_load(
    *, load_before: float, load_after: float, other_cores: float | None, num_cores: int
) -> str:
    """Says whether the machine was idle during a measurement, in one line.

    Args:
        load_before: the 1-minute load average before the measurement.
        load_after: the same after it (it counts the measurement itself).
        other_cores: cores that other processes kept busy on average during it; None
            when unknown (no /proc/stat), then `load_before` is judged instead.
        num_cores: the machine's cores.

    Returns:
        "The machine was idle: ..." or "The machine was NOT idle: ...", with the loads.
    """
    loads = f"load average {load_before:.2f} before, {load_after:.2f} after"
    if other_cores is None and math.isnan(load_before):
        return "The machine's load is unknown here (no /proc/stat, no load average)."
    if other_cores is None:
        busy, what = load_before, f"the load average before was {load_before:.2f}"
    else:
        busy = other_cores
        what = f"other processes kept {other_cores:.2f} of {num_cores} cores busy"
    if busy > NOT_IDLE_SHARE * num_cores:
        return (
            f"The machine was NOT idle: {what} on average ({loads}); these are not "
            "idle-machine figures."
        )
    return f"The machine was idle: {what} on average ({loads}, which counts this run too)."


def _busy_cpu_seconds() -> float | None:
    """Returns the CPU seconds all processes have used since boot (/proc/stat), or None."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except (OSError, IndexError):
        return None
    ticks = [int(field) for field in fields[:8]]  # user nice system idle iowait irq softirq steal
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def _load_average() -> float:
    """Returns the 1-minute load average; NaN where the system has none (Windows)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan


def _own_cpu_seconds() -> float:
    import resource  # Unix only; /proc/stat, which this goes with, is Linux only.

    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class LoadWatch:
    """Watches the machine's load during a measurement: `with timing.LoadWatch() as load:`.

    On exit it holds the load averages before and after, and the cores that other
    processes (not this one or its children) kept busy on average; `summary()` says
    whether the machine was idle.

    Example:
        with timing.LoadWatch() as load:
            runs = timing.measure_in_turns(candidates, num_images=4000)
        print(load.summary())
    """

    def __enter__(self):
        self.load_before = _load_average()
        self._busy = _busy_cpu_seconds()
        self._own = _own_cpu_seconds() if self._busy is not None else 0.0
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc_info):
        seconds = max(time.perf_counter() - self._start, 1e-9)
        busy = _busy_cpu_seconds()
        self.load_after = _load_average()
        self.num_cores = os.cpu_count() or 1
        self.other_cores = None
        if busy is not None and self._busy is not None:
            own = _own_cpu_seconds() - self._own
            self.other_cores = max(0.0, (busy - self._busy) - own) / seconds
        return False

    def summary(self) -> str:
        """The `describe_load` line for this measurement.

        Returns:
            Whether the machine was idle while the `with` block ran, in one line.
        """
        return describe_load(
            load_before=self.load_before,
            load_after=self.load_after,
            other_cores=self.other_cores,
            num_cores=self.num_cores,
        )
