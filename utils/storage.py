"""Simulated remote object storage: a first-byte latency charged for every object opened.

Objects are image files (`read_file`, lab 1) or TFRecord files (`tfrecord_dataset`, lab 3).
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import tensorflow as tf

# Kept at import, so that reads still reach the disk when a caller routes
# tf.io.read_file itself through this storage (the benchmark does, for Keras).
_read_file = tf.io.read_file


class SimulatedStorage:
    """Reads files as if each one were an object on cloud storage.

    Every object opened waits `latency_ms` before its first byte, then, with a bandwidth
    cap, `num_bytes / megabytes_per_second`. The wait holds the thread that asked, as a
    real blocking read does, and requests on different threads overlap, as they do on real
    object storage. The storage counts requests, bytes and the most requests seen in flight
    at once, so that a pipeline's real parallelism can be measured.

    Args:
        latency_ms: first-byte latency per object, in milliseconds (0 for local disk).
        megabytes_per_second: bandwidth cap per object stream; None for no cap.
        simulated: False for real remote storage (a `gs://` source): nothing is added.

    Raises:
        ValueError: if `latency_ms` is negative or `megabytes_per_second` is not positive.

    Example:
        storage = SimulatedStorage(latency_ms=50)
        image_bytes = storage.read_file(path)  # Use it where you would use tf.io.read_file.
    """

    def __init__(
        self,
        latency_ms: float = 50.0,
        *,
        megabytes_per_second: float | None = None,
        simulated: bool = True,
    ):
        if not isinstance(latency_ms, (int, float)) or latency_ms < 0:
            raise ValueError(
                f"`latency_ms` must be a number >= 0. Received: latency_ms={latency_ms!r}"
            )
        if megabytes_per_second is not None and not megabytes_per_second > 0:
            raise ValueError(
                "`megabytes_per_second` must be positive or None. "
                f"Received: megabytes_per_second={megabytes_per_second!r}"
            )
        self.latency_ms = float(latency_ms) if simulated else 0.0
        self.megabytes_per_second = megabytes_per_second if simulated else None
        self.simulated = simulated
        self._lock = threading.Lock()
        self._in_flight = 0
        self.reset_counters()

    @classmethod
    def for_source(cls, source, *, latency_ms: float = 50.0, **kwargs) -> SimulatedStorage:
        """Returns the storage for an `ImageSource`: simulated, unless it is really remote."""
        return cls(latency_ms, simulated=not source.is_remote, **kwargs)

    def describe(self) -> str:
        """Returns one line saying what is simulated."""
        if not self.simulated:
            return "Real remote storage: no latency is simulated."
        if self.latency_ms == 0 and self.megabytes_per_second is None:
            return "Local disk: no latency simulated."
        cap = (
            f", {self.megabytes_per_second:g} MB/s per stream" if self.megabytes_per_second else ""
        )
        return (
            f"SIMULATED remote storage: {self.latency_ms:g} ms first-byte latency per object{cap}."
        )

    def reset_counters(self) -> None:
        """Sets the request and byte counters to zero, and the in-flight peak to now's count."""
        with self._lock:
            self.num_requests = 0
            self.num_bytes_read = 0
            self.max_in_flight = self._in_flight

    def wait_for_object(self, num_bytes: int) -> None:
        """Blocks as long as opening one object of `num_bytes` bytes takes, and counts it."""
        with self._lock:
            self.num_requests += 1
            self.num_bytes_read += int(num_bytes)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            seconds = self.latency_ms / 1000
            if self.megabytes_per_second:
                seconds += num_bytes / (self.megabytes_per_second * 1e6)
            if seconds:
                time.sleep(seconds)
        finally:
            with self._lock:
                self._in_flight -= 1

    def read_file(self, path: tf.Tensor) -> tf.Tensor:
        """Reads one file's bytes, like `tf.io.read_file`, after the simulated wait.

        Args:
            path: a scalar string tensor, such as an element of `Dataset.list_files`.

        Returns:
            A scalar string tensor with the file's bytes.

        Example:
            images = filenames.map(lambda path: tf.io.decode_jpeg(storage.read_file(path)))
        """
        if not self.simulated:
            return _read_file(path)
        waited = tf.numpy_function(self._wait_for_path, [path], tf.int64, stateful=True)
        with tf.control_dependencies([waited]):
            return _read_file(path)

    def tfrecord_dataset(self, filenames, *, num_parallel_reads: int | None = None):
        """Reads TFRecord files, like `tf.data.TFRecordDataset`, paying the wait per file opened.

        Args:
            filenames: a list of paths or a dataset of path strings.
            num_parallel_reads: files read at once (None: one after another; an integer or
                `tf.data.AUTOTUNE`), as in `tf.data.TFRecordDataset`.

        Returns:
            A dataset of serialized records. Records of files read in parallel interleave;
            their order follows `options.deterministic`, as in `tf.data.TFRecordDataset`.

        Example:
            records = storage.tfrecord_dataset(shard_paths, num_parallel_reads=16)
        """
        if not self.simulated:
            return tf.data.TFRecordDataset(filenames, num_parallel_reads=num_parallel_reads)
        if not isinstance(filenames, tf.data.Dataset):
            filenames = tf.data.Dataset.from_tensor_slices(tf.constant(filenames, tf.string))

        def open_file(path):
            waited = tf.numpy_function(self._wait_for_path, [path], tf.int64, stateful=True)
            with tf.control_dependencies([waited]):
                return tf.identity(path)

        def records_of(path):
            return tf.data.TFRecordDataset(tf.data.Dataset.from_tensors(path).map(open_file))

        if num_parallel_reads is None:
            return filenames.flat_map(records_of)
        records = filenames.interleave(
            records_of, cycle_length=num_parallel_reads, num_parallel_calls=num_parallel_reads
        )
        # A real read blocks one of the interleave's own threads; the simulated wait runs as
        # a function, which also needs a thread of tf.data's pool. Give it one per read, so
        # that the simulation does not limit the reads in flight more than storage would.
        options = tf.data.Options()
        pool_size = (os.cpu_count() or 1) + max(num_parallel_reads, 1)
        options.threading.private_threadpool_size = pool_size
        return records.with_options(options)

    def _wait_for_path(self, path: bytes) -> np.int64:
        name = path.decode() if isinstance(path, bytes) else str(path)
        num_bytes = os.path.getsize(name) if "://" not in name else tf.io.gfile.stat(name).length
        self.wait_for_object(num_bytes)
        return np.int64(num_bytes)
