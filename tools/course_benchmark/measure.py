"""How the course benchmark times a pipeline: images/s after a warm-up, CPU per image, in turns."""

from __future__ import annotations

import contextlib
import io
import time


def quietly(function, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()):
        return function(*args, **kwargs)


def cpu_seconds() -> float:
    """CPU seconds of this process and its live child processes (Grain's workers), all threads.

    A worker that has ended is no longer counted: time a run while its workers live.
    """
    import psutil

    process = psutil.Process()
    total = sum(process.cpu_times()[:2])
    for child in process.children(recursive=True):
        with contextlib.suppress(psutil.Error):  # It ended meanwhile.
            total += sum(child.cpu_times()[:2])
    return total


def rate(make_dataset, num_images: int, cpu_log: list | None = None, warmup_batches: int = 1):
    """Returns a function that times a fresh `make_dataset()` (warm-up excluded): images/s.

    With `cpu_log`, each run also appends the CPU seconds per image to it (this process's;
    with Grain's worker processes, theirs too). `make_dataset` may return a
    `tf.data.Dataset` or any iterable of (images, labels) batches (a Grain dataset).
    `warmup_batches`: elements taken before the clock starts (the pipeline's start: its
    first opens, its buffers filling), as a training job pays once, not per step.
    """
    import tensorflow as tf

    from utils import timing

    def measure() -> float:
        dataset = make_dataset()
        if not isinstance(dataset, tf.data.Dataset):
            images_per_second, cpu_per_image = _time_iterable(dataset, num_images, warmup_batches)
        else:
            result = quietly(
                timing.measure_throughput,
                dataset,
                num_images=num_images,
                num_warmup_elements=warmup_batches,
            )
            images_per_second = result.images_per_second
            cpu_per_image = result.cpu_seconds / result.num_images
        if cpu_log is not None:
            cpu_log.append(cpu_per_image)
        return images_per_second

    return measure


def _time_iterable(dataset, num_images: int, warmup_batches: int = 1) -> tuple[float, float]:
    """Times batches from any iterable (a Grain dataset), as `measure_throughput` does.

    The first `warmup_batches` are the warm-up and are not timed (with worker processes,
    it includes their start). The iterator is closed at the end, so that its reading threads and
    worker processes stop before the next run starts.

    Returns:
        (images/s, CPU seconds per image of this process and its workers).
    """
    iterator = iter(dataset)
    try:
        for _ in range(warmup_batches):
            next(iterator)
        counted, start, cpu_start = 0, time.perf_counter(), cpu_seconds()
        for images, _ in iterator:
            counted += len(images)
            del images  # A batch in shared memory is freed when no longer referenced.
            if counted >= num_images:
                break
        seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu_start
    finally:
        if hasattr(iterator, "close"):
            iterator.close()
    return counted / seconds, cpu / counted


def figures_of(result) -> dict:
    return {
        "median": result.median,
        "min": result.minimum,
        "max": result.maximum,
        "runs": list(result.values),
    }


def in_turns_by_row(candidates: dict, repeats: int) -> dict:
    """`comparison.measure_in_turns` over `Row` -> candidate; its results keyed by the same rows."""
    from utils import comparison

    by_label = {row.label: row for row in candidates}
    measured = comparison.measure_in_turns(
        {row.label: candidate for row, candidate in candidates.items()}, repeats=repeats
    )
    return {by_label[label]: result for label, result in measured.items()}
