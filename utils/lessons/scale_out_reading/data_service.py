"""A tf.data service cluster of local processes on loopback, and a pipeline it can run.

`LocalCluster` starts a dispatcher and workers as separate processes (`python -m
utils.lessons.scale_out_reading.data_service dispatcher|worker ...`), the same commands
that run them on separate
machines, and stops every one of them when its `with` block ends.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from utils import arguments
from utils.lessons.scale_out_reading import metered_runs, processes

if TYPE_CHECKING:
    import tensorflow as tf

START_TIMEOUT_S = 120.0  # A process that imports TensorFlow on a busy 2-core machine is slow.


class LocalCluster:
    """A dispatcher and `num_workers` workers, each a local process on a loopback port.

    Use it as a context manager: every process it started is stopped when the block ends,
    also when the block raises.

    Example:
        with data_service.LocalCluster(num_workers=2) as cluster:
            dataset = dataset.apply(tf.data.experimental.service.distribute(
                "distributed_epoch", service=cluster.address))
    """

    def __init__(self, num_workers: int = 1, *, start_timeout_s: float = START_TIMEOUT_S):
        arguments.check_integer("num_workers", num_workers, 1)
        self.num_workers = num_workers
        self.start_timeout_s = start_timeout_s
        self.address = None
        self._dispatcher = None
        self._workers = []

    def __enter__(self) -> LocalCluster:
        try:
            port = processes.free_loopback_port()
            self._dispatcher = processes.start_module(
                "utils.lessons.scale_out_reading.data_service", "dispatcher", "--port", str(port)
            )
            processes.read_json_line(
                self._dispatcher, timeout_s=self.start_timeout_s, what="The dispatcher"
            )
            self.address = f"grpc://{processes.LOOPBACK}:{port}"
            for _ in range(self.num_workers):
                self._start_worker()
            self._wait_for_workers()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def add_worker(self) -> None:
        """Starts one more worker; it joins the jobs that are running."""
        self._start_worker()
        self._wait_for_workers()
        self.num_workers = len(self._workers)

    @property
    def pids(self) -> list[int]:
        """The process ids of the dispatcher and the workers."""
        return [process.pid for process in [self._dispatcher, *self._workers] if process]

    @property
    def pids_by_role(self) -> dict[str, int]:
        """The process ids by role: "dispatcher", "worker 0", "worker 1", ..."""
        roles = {"dispatcher": self._dispatcher.pid} if self._dispatcher else {}
        roles.update({f"worker {index}": w.pid for index, w in enumerate(self._workers)})
        return roles

    def describe(self) -> str:
        """Describes the cluster in one line.

        Returns:
            Where the dispatcher listens and how many workers there are.
        """
        return f"tf.data service: dispatcher {self.address}, {len(self._workers)} worker(s)."

    def stop(self) -> None:
        """Stops the workers, then the dispatcher (each SIGTERM, SIGKILL after 10 s)."""
        for process in [*self._workers, self._dispatcher]:
            if process is not None:
                processes.stop(process)

    def _start_worker(self) -> None:
        dispatcher = self.address.removeprefix("grpc://")
        self._workers.append(
            processes.start_module(
                "utils.lessons.scale_out_reading.data_service",
                "worker",
                "--dispatcher",
                dispatcher,
                "--port",
                str(processes.free_loopback_port()),
            )
        )

    def _wait_for_workers(self) -> None:
        for index, worker in enumerate(self._workers):
            if not getattr(worker, "ready", None):
                worker.ready = processes.read_json_line(
                    worker, timeout_s=self.start_timeout_s, what=f"Worker {index}"
                )


def shards_with_latency(
    shard_paths: Sequence[str],
    *,
    latency_ms: float,
    num_parallel_reads: int = 1,
    num_epochs: int | None = 1,
) -> tf.data.Dataset:
    """Reads TFRecord shards, waiting `latency_ms` before each one's first record: SIMULATED.

    `storage.SimulatedStorage` waits in Python, which the tf.data service cannot send to
    its workers (it ships the dataset's graph). This wait is a graph op (tf.data's
    `SleepDataset`, through `storage.apply_dataset_op`), so the workers run it. The file
    names come first, so that the service's `"distributed_epoch"` mode hands out whole
    shards.

    Args:
        shard_paths: the shards to read.
        latency_ms: the simulated first-byte latency of each shard, in milliseconds.
        num_parallel_reads: shards read (and waited for) at once.
        num_epochs: passes over the shards; None reads endlessly.

    Returns:
        A dataset of the serialized records.

    Raises:
        ValueError: if `latency_ms` is negative.

    Example:
        records = data_service.shards_with_latency(shard_paths, latency_ms=50)
    """
    import tensorflow as tf

    from utils import storage

    if latency_ms < 0:
        raise ValueError(f"`latency_ms` must be >= 0. Received: latency_ms={latency_ms}")

    def open_shard(path):
        waited = storage.apply_dataset_op(
            tf.data.Dataset.from_tensors(path),
            tf.raw_ops.SleepDataset,
            sleep_microseconds=int(latency_ms * 1000),
        )
        return waited.flat_map(tf.data.TFRecordDataset)

    files = tf.data.Dataset.from_tensor_slices(list(shard_paths)).repeat(num_epochs)
    return files.interleave(
        open_shard, cycle_length=num_parallel_reads, num_parallel_calls=num_parallel_reads
    )


def measure_one_cluster_at_a_time(
    settings: dict[str, tuple[int, str | None]],
    make_dataset: Callable[[str, str | None], tf.data.Dataset],
    *,
    num_images: int,
    repeats: int,
    first_use: Callable[[LocalCluster], None] | None = None,
) -> dict[str, metered_runs.MeteredRuns]:
    """Times settings of the tf.data service in turns, with only the cluster being timed running.

    Each round starts a cluster per worker count in turn (the order reversed every other
    round), times that count's settings (also in turn), and stops it before the next one
    starts: no other cluster works on buffers of its own, or takes cores, meanwhile.
    Prints each setting's images/s as `comparison.measure_in_turns` does.

    Args:
        settings: {label: (number of workers, compression: "AUTO" or None)}.
        make_dataset: `make_dataset(service_address, compression)` returns the dataset
            to time, sent to that service.
        num_images: images timed per run.
        repeats: rounds (at least 1).
        first_use: called with each cluster of the first round before it is timed.

    Returns:
        {label: its `metered_runs.MeteredRuns`}, in the order of `settings`.

    Raises:
        ValueError: if `repeats` is not a positive integer or `settings` is empty.

    Example:
        runs = data_service.measure_one_cluster_at_a_time(
            {"1 worker": (1, "AUTO"), "2 workers": (2, "AUTO")}, make_dataset,
            num_images=2000, repeats=3)
    """
    arguments.check_integer("repeats", repeats, 1)
    if not settings:
        raise ValueError("`settings` must name at least one setting. Received: {}")
    metered = {label: metered_runs.MeteredRuns(label) for label in settings}
    worker_counts = list(dict.fromkeys(workers for workers, _ in settings.values()))
    for round_index in range(repeats):
        in_turn = 1 if round_index % 2 == 0 else -1
        for num_workers in worker_counts[::in_turn]:
            with LocalCluster(num_workers=num_workers) as cluster:
                if round_index == 0 and first_use is not None:
                    first_use(cluster)
                pids = {"notebook": os.getpid(), **cluster.pids_by_role}
                labels = [label for label, (n, _) in settings.items() if n == num_workers]
                for label in labels[::in_turn]:
                    dataset = make_dataset(cluster.address, settings[label][1])
                    metered[label].run(dataset, num_images=num_images, pids_by_role=pids)
    for runs in metered.values():
        print(runs.result.summary() + " images/s, taken in turns, one cluster at a time")
    return metered


def _serve(arguments: list[str] | None = None) -> None:
    """Runs a dispatcher or a worker until it is stopped (the command line of this module)."""
    parser = argparse.ArgumentParser(prog="python -m utils.lessons.scale_out_reading.data_service")
    parser.add_argument("role", choices=["dispatcher", "worker"])
    parser.add_argument("--port", type=int, default=5050, help="the port to listen on")
    parser.add_argument("--dispatcher", help="the dispatcher's host:port (workers only)")
    parser.add_argument(
        "--worker-host",
        default=processes.LOOPBACK,
        help="the name or address clients reach this worker at (workers only)",
    )
    args = parser.parse_args(arguments)
    processes.exit_with_owner()

    import tensorflow as tf

    service = tf.data.experimental.service
    if args.role == "dispatcher":
        server = service.DispatchServer(service.DispatcherConfig(port=args.port))
    else:
        if not args.dispatcher:
            parser.error("a worker needs --dispatcher HOST:PORT")
        server = service.WorkerServer(
            service.WorkerConfig(
                dispatcher_address=args.dispatcher,
                worker_address=f"{args.worker_host}:%port%",
                port=args.port,
            )
        )
    processes.print_json(role=args.role, port=args.port)
    server.join()


if __name__ == "__main__":
    _serve()
