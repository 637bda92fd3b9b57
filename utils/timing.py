"""Throughput measurement: images per second, warm-up excluded."""

from __future__ import annotations

import dataclasses
import time

import tensorflow as tf


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
    """

    label: str
    num_images: int
    seconds: float
    images_per_second: float
    megabytes_per_second: float | None
    warmup_seconds: float

    def summary(self) -> str:
        """Returns the one-line summary that `measure_throughput` prints."""
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
    storage=None,
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
    if isinstance(num_images, bool) or not isinstance(num_images, int) or num_images < 1:
        raise ValueError(f"`num_images` must be a positive integer. Received: {num_images!r}")
    if not isinstance(num_warmup_elements, int) or num_warmup_elements < 0:
        raise ValueError(
            "`num_warmup_elements` must be an integer >= 0. "
            f"Received: num_warmup_elements={num_warmup_elements!r}"
        )
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
    start = time.perf_counter()
    for element in iterator:
        counted += _count_images(element)
        if counted >= num_images:
            break
    seconds = time.perf_counter() - start
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
    )
    print(result.summary())
    return result


def compare_throughput(results: list[ThroughputResult], *, baseline: str) -> dict[str, float]:
    """Prints a table of results with each one's speed-up over `baseline`, and returns them.

    Args:
        results: measurements, with distinct labels.
        baseline: the label of the result the others are compared with.

    Returns:
        A dict from label to `images_per_second / baseline's images_per_second`.

    Raises:
        ValueError: if no result has the label `baseline`.

    Example:
        speedups = timing.compare_throughput([sequential, parallel], baseline="sequential")
    """
    by_label = {result.label: result for result in results}
    if baseline not in by_label:
        raise ValueError(f"`baseline` must be one of {list(by_label)}. Received: {baseline!r}")
    reference = by_label[baseline].images_per_second
    width = max(len(label) for label in by_label)
    print(f"{'pipeline':<{width}}  {'images/s':>9}  {'MB/s':>6}  {'vs ' + baseline:>12}")
    speedups = {}
    for label, result in by_label.items():
        speedups[label] = result.images_per_second / reference
        megabytes = result.megabytes_per_second
        megabytes_text = f"{megabytes:6.1f}" if megabytes is not None else f"{'-':>6}"
        print(
            f"{label:<{width}}  {result.images_per_second:9.1f}  {megabytes_text}  "
            f"{speedups[label]:11.1f}x"
        )
    return speedups


def time_training_steps(model, dataset: tf.data.Dataset, *, num_steps: int) -> float:
    """Returns the seconds per training step of `model.fit` on `dataset`, warm-up excluded.

    Fits two epochs of `num_steps` steps and times the second (the first includes tracing
    and compiling the step function). The model's weights change: time a copy if that
    matters.

    Example:
        seconds = timing.time_training_steps(model, train_dataset, num_steps=40)
    """
    import keras  # Imported here: the other helpers do not need Keras.

    if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 1:
        raise ValueError(f"`num_steps` must be a positive integer. Received: {num_steps!r}")
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
