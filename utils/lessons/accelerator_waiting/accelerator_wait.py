"""A stand-in accelerator whose steps are sleeps, and how long it waits for its batches.

Lesson 5's question: does the feed keep up with the training step? The stand-in
(`SimulatedAccelerator`) records, per step, how long it waited for its batch; the lesson's
feeds are timed feeding it (`comparison.measure_in_turns`), and `plot_step_timelines`
draws the waits.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import tensorflow as tf

from utils import comparison
from utils.lab import arguments

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


def describe_stand_in(images_per_second: float, *, batch_size: int) -> str:
    """Says what the stand-in accelerator takes per step, where its default rate comes from,
    and what that estimate assumes.

    Args:
        images_per_second: the stand-in's rate (the lesson's `STAND_IN_IMAGES_PER_SECOND`).
        batch_size: images per step.

    Returns:
        Three lines: the step time; `STAND_IN_IMAGES_PER_SECOND`'s derivation; its
        assumptions.

    Example:
        print(accelerator_wait.describe_stand_in(2120, batch_size=16))
    """
    step_ms = 1000 * batch_size / images_per_second
    return "\n".join(
        [
            f"SIMULATED accelerator: {images_per_second:,.0f} images/s, a step of {batch_size} "
            f"images takes {step_ms:.1f} ms (a sleep).",
            f"Its default rate: a TPU v5e chip training ResNet-50 on 192 px images, estimated: "
            f"{A100_RESNET50_IMAGES_PER_SECOND:,} images/s on an A100 (NVIDIA, PyTorch, mixed "
            f"precision, 224 px) x {V5E_PEAK_BF16_TFLOPS}/{A100_PEAK_BF16_TFLOPS} peak bf16 "
            f"TFLOPs x (224/192)^2 pixels = {STAND_IN_IMAGES_PER_SECOND:,.0f}.",
            "Assumed: both chips reach the same share of their peak on ResNet-50; a step costs "
            "in proportion to the pixels; the step takes no CPU from the feed (a TPU computes "
            "on its own chip; here, a sleep).",
        ]
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
                                                         batch_size=32, num_steps=32)
        runs = comparison.measure_in_turns(stand_in.candidates({"naive": naive}), repeats=5)
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

    def describe_idle(self) -> list[str]:
        """Says, for each label, how long a step waited for its batch: median and range.

        Returns:
            One line per label: `label: idle <median> ms per step (<min>-<max>, N runs),
            against a step of <step> ms`.
        """
        return [
            f"{idle.summary('.1f')} ms idle per step, against a step of "
            f"{1000 * self.step_seconds:.1f} ms"
            for idle in self.idle_runs().values()
        ]


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
