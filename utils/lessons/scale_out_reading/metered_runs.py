"""Timed runs of a dataset, each with the CPU time its processes spent over the timed span.

Lesson 7 meters the tf.data service's dispatcher and workers with the notebook
(`processes.CpuUse`): the rate each setting reaches, and the rate its CPU time allows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from utils import arguments
from utils.lessons.scale_out_reading import processes

if TYPE_CHECKING:
    import tensorflow as tf

    from utils import comparison


class MeteredRuns:
    """Timed runs of one setting, each with the CPU time of named processes over its timed span.

    Each `run` reads a warm-up element first, untimed and unmetered (the iterator's start
    and the first element: starting a service job, tracing, filling buffers), then times
    `num_images` while `processes.CpuUse` meters the named processes, over exactly the
    timed span. So each run gives its images/s, the cores its processes kept busy
    (`busy_cores`: at most the cores there are), and the rate the CPU allows
    (`cpu_limits`: the cores available over the CPU time of one image).

    Args:
        label: the setting's name.

    Example:
        runs = metered_runs.MeteredRuns("1 worker")
        runs.run(dataset, num_images=2000, pids_by_role={"notebook": os.getpid()})
        print(runs.result.summary(), runs.cpu_limits.summary())
    """

    def __init__(self, label: str):
        self.label = label
        self.images_per_second: list[float] = []
        self.busy_cores: list[float] = []
        self.cpu_seconds: list[float] = []
        self.num_images: list[int] = []

    def run(
        self,
        dataset: tf.data.Dataset,
        *,
        num_images: int,
        pids_by_role: dict[str, int],
        num_warmup_elements: int = 1,
    ) -> float:
        """Times `num_images` of `dataset` after a warm-up, metering CPU over the timed span.

        Args:
            dataset: yields batches of images (or (images, labels)); endless or long enough.
            num_images: images timed.
            pids_by_role: {name: pid} of every process that works for the dataset (this
                notebook, the dispatcher, the workers).
            num_warmup_elements: elements read first, neither timed nor metered.

        Returns:
            Images per second of this run.

        Raises:
            ValueError: if a count is not positive, or the dataset ends before the timing.
        """
        import time

        from utils import timing

        arguments.check_integer("num_images", num_images, 1)
        arguments.check_integer("num_warmup_elements", num_warmup_elements, 0)
        iterator = iter(dataset)
        for _ in range(num_warmup_elements):
            if next(iterator, None) is None:
                raise ValueError("The dataset ended during the warm-up: nothing was timed.")
        counted = 0
        with processes.CpuUse(pids_by_role) as cpu:
            start = time.perf_counter()
            for element in iterator:
                counted += timing._count_images(element)  # As measure_throughput counts.
                if counted >= num_images:
                    break
            seconds = time.perf_counter() - start
        if counted == 0:
            raise ValueError("The dataset ended right after the warm-up: nothing was timed.")
        self.images_per_second.append(counted / seconds)
        self.busy_cores.append(cpu.total)
        self.cpu_seconds.append(cpu.cpu_seconds)
        self.num_images.append(counted)
        return counted / seconds

    @property
    def result(self) -> comparison.RepeatedResult:
        """Images/s of the runs, labelled with the setting."""
        from utils import comparison

        return comparison.RepeatedResult(self.label, tuple(self.images_per_second))

    @property
    def cpu_ms_per_image(self) -> float:
        """CPU milliseconds per image over the timed spans of all runs (all named processes)."""
        return 1000 * sum(self.cpu_seconds) / max(sum(self.num_images), 1)

    @property
    def cpu_limits(self) -> comparison.RepeatedResult:
        """Per run, the images/s the CPU allows: the cores available over the CPU time per image.

        A run's rate is at most its limit (its processes cannot keep more cores busy than
        there are), so the median rate is at most the median limit.
        """
        from utils import comparison, machine_load

        cores = machine_load.usable_cores()
        limits = tuple(
            cores * images / max(cpu, 1e-9)
            for images, cpu in zip(self.num_images, self.cpu_seconds, strict=True)
        )
        return comparison.RepeatedResult(f"{self.label}: the CPU allows", limits)
