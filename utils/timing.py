"""One throughput measurement: images per second, warm-up excluded; a training step's time."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import tensorflow as tf

from utils import arguments

if TYPE_CHECKING:
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


def _count_images(element: tf.Tensor | tuple | dict) -> int:
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
        runs = comparison.measure_in_turns({"files": timing.throughput_timer(files, num_images=40),
                                        "shards": timing.throughput_timer(fast, num_images=4000)})
    """

    def run() -> float:
        with contextlib.redirect_stdout(io.StringIO()):
            return measure_throughput(
                dataset, num_images=num_images, num_warmup_elements=num_warmup_elements
            ).images_per_second

    return run
