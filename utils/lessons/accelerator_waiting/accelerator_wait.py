"""A stand-in accelerator whose steps are sleeps, and how long it waits for its batches.

Lesson 5's question: does the feed keep up with the training step? The stand-in
(`SimulatedAccelerator`) records, per step, how long it waited for its batch;
`SimulatedAccelerator.compare` times the lesson's feeds feeding it, in turns, and judges
each against the first; `plot_step_timelines` draws the waits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import statistics
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import tensorflow as tf

from utils import arguments, comparison

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# The stand-in accelerator's rate: what one TPU v5e chip would take training ResNet-50 on
# this course's 192 px images. We found no per-chip v5e images/s for ResNet-50 training
# that we could check, so it is scaled from a published figure: ResNet-50 v1.5 trains at
# 2,470 images/s on one A100 80GB (NVIDIA DeepLearningExamples, PyTorch, mixed precision,
# 224 px; the figure lesson 7 quotes), times the chips' peak bf16 compute, 197 TFLOPs for
# v5e (cloud.google.com/tpu/docs/v5e) against 312 for A100 (NVIDIA's A100 datasheet,
# dense), times the pixels per image, 224 x 224 against 192 x 192. An estimate, not a
# measurement: real chips reach different shares of their peaks.
A100_RESNET50_IMAGES_PER_SECOND = 2470
V5E_PEAK_BF16_TFLOPS = 197
A100_PEAK_BF16_TFLOPS = 312
STAND_IN_IMAGES_PER_SECOND = (
    A100_RESNET50_IMAGES_PER_SECOND
    * V5E_PEAK_BF16_TFLOPS
    / A100_PEAK_BF16_TFLOPS
    * (224 / 192) ** 2
)


@dataclasses.dataclass(frozen=True)
class StepTimeline:
    """When a (simulated) accelerator waited for each batch and when it computed on it.

    Attributes:
        label: what fed it.
        waits: per step, (asked for the batch, got it), in seconds from the first step.
        steps: per step, (start, end) of the step, in seconds from the first step.
        batch_size: images per step.
    """

    label: str
    waits: list[tuple[float, float]]
    steps: list[tuple[float, float]]
    batch_size: int

    @property
    def idle_ms_per_step(self) -> float:
        """Returns the mean time a step waited for its batch, in milliseconds."""
        return 1000 * statistics.fmean(got - asked for asked, got in self.waits)

    @property
    def images_per_second(self) -> float:
        """Returns the images trained per second, waits included: batch / (step + idle)."""
        return self.batch_size * len(self.steps) / (self.steps[-1][1] - self.waits[0][0])


class SimulatedAccelerator:
    """A stand-in accelerator: each training step is a sleep of `batch_size / rate` seconds.

    A SIMULATION: nothing is computed. During a step the caller asks for nothing, as a
    training loop between two steps; only what the pipeline runs in the background
    (`prefetch`, a parallel `map`) goes on. The time spent in `next()` before a step is
    the accelerator's idle time. Each run keeps its `StepTimeline`, by label.

    Args:
        images_per_second: the images it consumes per second when never kept waiting.
        batch_size: images per step.
        num_steps: steps timed per run.
        num_warmup_steps: steps run before the timed ones (the pipeline starts up).

    Example:
        stand_in = accelerator_wait.SimulatedAccelerator(images_per_second=2120,
                                                         batch_size=16, num_steps=32)
        print(stand_in.describe())
        lines = stand_in.compare({"from memory": in_memory, "naive": naive}, repeats=5)
    """

    def __init__(
        self,
        *,
        images_per_second: float,
        batch_size: int,
        num_steps: int,
        num_warmup_steps: int = 8,
    ):
        if not (isinstance(images_per_second, (int, float)) and images_per_second > 0):
            raise ValueError(
                "`images_per_second` must be a positive number. "
                f"Received: images_per_second={images_per_second!r}"
            )
        arguments.check_integer("batch_size", batch_size, 1)
        arguments.check_integer("num_steps", num_steps, 1)
        arguments.check_integer("num_warmup_steps", num_warmup_steps, 0)
        self.images_per_second = images_per_second
        self.step_seconds = batch_size / images_per_second
        self.batch_size = batch_size
        self.num_steps = num_steps
        self.num_warmup_steps = num_warmup_steps
        self.timelines: dict[str, list[StepTimeline]] = {}
        self.last_runs: dict[str, comparison.RepeatedResult] = {}

    def run(self, dataset: tf.data.Dataset, *, label: str) -> StepTimeline:
        """Trains (sleeps) on `dataset` for the warm-up and timed steps; keeps the timeline.

        Args:
            dataset: endless batches.
            label: what feeds it; the timeline is kept under it.

        Returns:
            The timed steps' `StepTimeline`.
        """
        batches = iter(dataset)
        waits, steps = [], []
        for index in range(self.num_warmup_steps + self.num_steps):
            asked = time.perf_counter()
            next(batches)
            got = time.perf_counter()
            time.sleep(self.step_seconds)  # The step: a sleep, which frees the CPU.
            if index >= self.num_warmup_steps:
                waits.append((asked, got))
                steps.append((got, time.perf_counter()))
        start = waits[0][0]
        timeline = StepTimeline(
            label,
            [(a - start, b - start) for a, b in waits],
            [(a - start, b - start) for a, b in steps],
            self.batch_size,
        )
        self.timelines.setdefault(label, []).append(timeline)
        return timeline

    def candidates(self, datasets: dict[str, tf.data.Dataset]) -> dict[str, Callable[[], float]]:
        """Candidates for `comparison.measure_in_turns`: images/s the stand-in trains at.

        Args:
            datasets: label -> endless batches.

        Returns:
            label -> a function of no arguments that runs it once and returns images/s.
        """
        return {
            label: lambda label=label, dataset=dataset: (
                self.run(dataset, label=label).images_per_second
            )
            for label, dataset in datasets.items()
        }

    def idle_runs(self) -> dict[str, comparison.RepeatedResult]:
        """Each label's idle milliseconds per step, one value per run.

        Returns:
            {label: the idle milliseconds per step of each run, as a `RepeatedResult`}.
        """
        return {
            label: comparison.RepeatedResult(
                label, tuple(timeline.idle_ms_per_step for timeline in timelines)
            )
            for label, timelines in self.timelines.items()
        }

    def describe(self) -> str:
        """Says what a step takes, where the default rate comes from and what it assumes.

        Returns:
            Two lines: the rate and the step; `STAND_IN_IMAGES_PER_SECOND`'s derivation
            and its assumptions.
        """
        return "\n".join(
            [
                f"SIMULATED accelerator: {self.images_per_second:,.0f} images/s; a step of "
                f"{self.batch_size} images is a {1000 * self.step_seconds:.1f} ms sleep, which "
                "leaves the CPU to the feed (a TPU computes on its own chip).",
                "Its default rate, a TPU v5e chip training ResNet-50 at 192 px, is estimated: "
                f"{A100_RESNET50_IMAGES_PER_SECOND:,} images/s on an A100 (NVIDIA, 224 px) x "
                f"{V5E_PEAK_BF16_TFLOPS}/{A100_PEAK_BF16_TFLOPS} peak bf16 TFLOPs x (224/192)^2 "
                f"= {STAND_IN_IMAGES_PER_SECOND:,.0f}, if both chips reach the same share of "
                "their peak and a step costs in proportion to its pixels.",
            ]
        )

    def at_speed(self, factor: float) -> SimulatedAccelerator:
        """A stand-in like this one, at another rate.

        Args:
            factor: its rate over this one's.

        Returns:
            A new `SimulatedAccelerator`: the same batch and steps, `factor` times the rate.
        """
        return SimulatedAccelerator(
            images_per_second=factor * self.images_per_second,
            batch_size=self.batch_size,
            num_steps=self.num_steps,
            num_warmup_steps=self.num_warmup_steps,
        )

    def compare(self, feeds: dict[str, tf.data.Dataset], *, repeats: int) -> list[str]:
        """Feeds the stand-in from each dataset, `repeats` rounds in turns, and judges each
        against the first (`comparison.measure_in_turns`, `comparison.verdict`).

        Args:
            feeds: label -> endless batches; the first is the baseline (from memory).
            repeats: rounds.

        Returns:
            One line per feed after the first: `label: <median> images/s (<range> over N
            rounds), <ratio>x <baseline>'s <median> (<range>); idle <ms> ms per <ms> ms
            step, <baseline> <ms>: <verdict>.` The verdict is "beyond the noise", "small but
            consistent", "not resolved in N rounds", or "not judged" with the cores other
            processes kept busy.

        Example:
            lines = stand_in.compare({"from memory": in_memory, "naive": naive}, repeats=5)
        """
        with contextlib.redirect_stdout(io.StringIO()):  # The lines below say it once.
            runs = comparison.measure_in_turns(self.candidates(feeds), repeats=repeats)
        self.last_runs = runs
        idle = self.idle_runs()
        (base, *labels) = feeds
        lines = []
        for label in labels:
            fed, baseline = runs[label], runs[base]
            said = comparison.verdict(
                fed,
                baseline,
                faster=f"faster than {base}",
                slower="the accelerator waits",
            )
            lines.append(
                f"{label}: {fed.median:,.0f} images/s ({fed.minimum:,.0f}-{fed.maximum:,.0f} "
                f"over {fed.num_runs} rounds), {fed.median / baseline.median:.2f}x {base}'s "
                f"{baseline.median:,.0f} ({baseline.minimum:,.0f}-{baseline.maximum:,.0f}); "
                f"idle {idle[label].median:.1f} ms per {1000 * self.step_seconds:.1f} ms step, "
                f"{base} {idle[base].median:.1f}: {said}."
            )
        return lines

    def extra_wait(self, label: str, base: str) -> tuple[str, bool]:
        """Judges the idle time `label` added beyond `base`'s, after `compare` ran both.

        The rule (`waits_beyond`): the accelerator waits for a feed when its median idle
        per step exceeds the baseline's by at least `MIN_EXTRA_WAIT` of the step and every
        round of it idled longer than every round of the baseline. Not judged where other
        processes kept a share of the cores busy (`comparison.verdict`'s rule).

        Args:
            label: the feed judged.
            base: the baseline fed in the same rounds (from memory).

        Returns:
            (one line: both idle times, the extra wait in ms and as a share of the step,
            and what the rule says; True when the accelerator waits for the feed).
        """
        idle = self.idle_runs()
        fed, baseline = idle[label], idle[base]
        step_ms = 1000 * self.step_seconds
        extra = fed.median - baseline.median
        said = (
            f"idle {fed.median:.1f} ms a step, {base} {baseline.median:.1f}: "
            f"{extra:.1f} ms beyond, {extra / step_ms:.0%} of the {step_ms:.1f} ms step"
        )
        busy = comparison.verdict(self.last_runs[label], self.last_runs[base])
        if busy.startswith("not judged"):
            return f"{said}: {busy}.", False
        if waits_beyond(fed, baseline, step_ms=step_ms):
            return f"{said}: the accelerator waits.", True
        return f"{said}: it keeps up.", False

    def find_break_point(
        self,
        feeds: dict[str, tf.data.Dataset],
        *,
        feed_images_per_second: float,
        factors: Sequence[float],
        repeats: int,
    ) -> list[str]:
        """Runs stand-ins ever faster until the feed keeps them waiting (`extra_wait`'s rule).

        Each stand-in has this one's batch and steps, its rate a factor of the feed's own.

        Args:
            feeds: {"from memory": the input that costs nothing, label: the feed judged}.
            feed_images_per_second: the feed's own rate here, measured without a
                consumer; the stand-ins' rates are `factors` times it.
            factors: the speeds to try, in order; the search stops at the first that waits.
            repeats: rounds of each comparison, in turns.

        Returns:
            One line per speed tried: the speed, then `extra_wait`'s line.

        Example:
            lines = stand_in.find_break_point({"from memory": in_memory, "course": feed},
                feed_images_per_second=3000, factors=[0.5, 1, 1.5], repeats=5)
        """
        (base, label) = feeds
        lines = []
        for factor in factors:
            stand_in = self.at_speed(factor * feed_images_per_second / self.images_per_second)
            stand_in.compare({base: feeds[base], label: feeds[label]}, repeats=repeats)
            line, waits = stand_in.extra_wait(label, base)
            speed = f"{factor:g}x its rate ({stand_in.images_per_second:,.0f} images/s)"
            lines.append(f"{label}, stand-in at {speed}: {line}")
            if waits:
                break
        return lines

    def plot_last_runs(self) -> Figure:
        """Draws the last run of each label (`plot_step_timelines`), one row each.

        Returns:
            The matplotlib Figure.
        """
        return plot_step_timelines([runs[-1] for runs in self.timelines.values()])


# The break-point rule: a wait matters when it is at least this share of the step.
MIN_EXTRA_WAIT = 0.10


def waits_beyond(
    fed: comparison.RepeatedResult, baseline: comparison.RepeatedResult, *, step_ms: float
) -> bool:
    """Whether a feed keeps the accelerator waiting by the lesson's rule.

    Args:
        fed: the feed's idle milliseconds per step, one value per round.
        baseline: the idle of the input that costs nothing, in the same rounds.
        step_ms: the step's length in milliseconds.

    Returns:
        True when the feed's median idle exceeds the baseline's by at least
        `MIN_EXTRA_WAIT` of the step and every round of it idled longer than every round
        of the baseline.
    """
    apart = fed.minimum > baseline.maximum
    return apart and fed.median - baseline.median >= MIN_EXTRA_WAIT * step_ms


def plot_step_timelines(timelines: Sequence[StepTimeline]) -> Figure:
    """Draws each timeline's whole run: the steps (green) and the waits before them (red).

    Args:
        timelines: `StepTimeline`s, one row each, on one time axis.

    Returns:
        The matplotlib Figure.

    Example:
        accelerator_wait.plot_step_timelines([runs[-1] for runs in stand_in.timelines.values()])
    """
    import matplotlib.pyplot as plt  # Imported here: the timing needs no plotting.

    figure, axis = plt.subplots(figsize=(10, 0.9 + 0.6 * len(timelines)))
    for row, timeline in enumerate(timelines):
        for (asked, got), (start, end) in zip(timeline.waits, timeline.steps, strict=True):
            for begin, finish, color in ((asked, got, "tab:red"), (start, end, "tab:green")):
                bar = (1000 * begin, 1000 * (finish - begin))
                axis.broken_barh([bar], (row - 0.3, 0.6), color=color)
    axis.set_yticks(range(len(timelines)), [timeline.label for timeline in timelines])
    axis.set_ylim(len(timelines) - 0.5, -0.5)
    axis.set_xlabel("milliseconds from the first timed step")
    axis.set_title("Green: a (simulated) step. Red: the accelerator waits for its batch")
    figure.tight_layout()
    return figure
