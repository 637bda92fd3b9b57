"""Simulated remote object storage: first-byte latency (fixed or long-tailed) and bandwidth.

Objects are image files (`read_file`, lab 1) or TFRecord files (`open_tfrecord`, lab 3's
reader; `tfrecord_dataset`, `utils.pipeline`'s), read with tf.data through the waits of
`StorageWaits` (the model itself: first bytes, bandwidth, counts), to which Grain's reader
(`grain_arrayrecord`) charges its own reads too.

The object-storage model's default numbers, and where they come from (lab 3 cites them):
- `MEDIAN_LATENCY_MS`: AWS's S3 guide says small requests see median latencies "in the
  range of tens of milliseconds", and 100-200 ms first-byte latency for larger objects
  ("Best practices design patterns: optimizing Amazon S3 performance").
- `TAIL_RATIO` (p99 / median): Dean and Barroso, "The Tail at Scale" (CACM 56(2), 2013),
  Table 1: one request to a large service, median 1 ms, 99th percentile 10 ms. The same
  AWS guide advises retrying the slowest 1-5% of requests: the tail is real.
- `STREAM_MEGABYTES_PER_SECOND`: the same AWS guide, "make one concurrent request for each
  85-90 MB/s of desired network throughput".
"""

from __future__ import annotations

import itertools
import os
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

if TYPE_CHECKING:
    from utils.lab.sources import ImageSource

MEDIAN_LATENCY_MS = 50.0
TAIL_RATIO = 10.0
STREAM_MEGABYTES_PER_SECOND = 85.0
# Records whose bytes are charged to their stream at once: about 1 MB of the course's
# 192 px JPEGs. The bandwidth is the same whatever the step; each charge is one Python call
# under the GIL, a cost real storage does not have. `python -m tools.benchmark latency`,
# CPU per image under the object-storage model against the simulation at 0 ms (medians of
# 7 rounds): charged per 8 records, 238 against 208 us; per 64, 215 against 210 us.
_RECORDS_PER_CHARGE = 64


_Z_99 = statistics.NormalDist().inv_cdf(0.99)  # 2.326: the p99 of a standard normal.


class StorageWaits:
    """The waits and counters of simulated object storage, one object or stream at a time.

    The model and its arguments are `storage.SimulatedStorage`'s (less `read_bytes`):
    a first-byte latency per object opened, fixed or long-tailed, then at most
    `megabytes_per_second` per stream and `total_megabytes_per_second` in all. A wait
    holds the thread that asked; waits on different threads overlap.

    Raises:
        ValueError: if a latency is negative, the p99 is below the median, or a bandwidth
            is not positive.
    """

    def __init__(
        self,
        latency_ms: float,
        *,
        latency_p99_ms: float | None = None,
        megabytes_per_second: float | None = None,
        total_megabytes_per_second: float | None = None,
        seed: int = 0,
        simulated: bool = True,
    ):
        if (
            isinstance(latency_ms, bool)
            or not isinstance(latency_ms, (int, float))
            or latency_ms < 0
        ):
            raise ValueError(
                f"`latency_ms` must be a number >= 0. Received: latency_ms={latency_ms!r}"
            )
        if latency_p99_ms is not None and not (
            isinstance(latency_p99_ms, (int, float)) and latency_p99_ms >= latency_ms
        ):
            raise ValueError(
                "`latency_p99_ms` must be None or a number >= latency_ms. "
                f"Received: latency_p99_ms={latency_p99_ms!r}, latency_ms={latency_ms!r}"
            )
        for name, value in (
            ("megabytes_per_second", megabytes_per_second),
            ("total_megabytes_per_second", total_megabytes_per_second),
        ):
            if value is not None and not value > 0:
                raise ValueError(f"`{name}` must be positive or None. Received: {name}={value!r}")
        self.latency_ms = float(latency_ms) if simulated else 0.0
        self.latency_p99_ms = latency_p99_ms if simulated else None
        self.megabytes_per_second = megabytes_per_second if simulated else None
        self.total_megabytes_per_second = total_megabytes_per_second if simulated else None
        self.simulated = simulated
        self._random = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._stream_ids = itertools.count()
        self._stream_clocks: dict[int, float] = {}
        self._network_clock = 0.0
        self.reset_counters()

    def describe(self) -> str:
        """Says what is simulated.

        Returns:
            One line: the latency model and the bandwidth caps, or that none is simulated.
        """
        if not self.simulated:
            return "Real remote storage: no latency is simulated."
        caps = [
            f"{self.megabytes_per_second:g} MB/s per stream" if self.megabytes_per_second else "",
            f"{self.total_megabytes_per_second:g} MB/s in all"
            if self.total_megabytes_per_second
            else "",
        ]
        cap = "".join(f", {text}" for text in caps if text)
        if self.latency_p99_ms is not None:
            return (
                f"SIMULATED object storage: first byte after {self.latency_ms:g} ms (median), "
                f"{self.latency_p99_ms:g} ms (p99){cap}."
            )
        if self.latency_ms == 0 and not cap:
            return "Local disk: no latency simulated."
        return (
            f"SIMULATED remote storage: {self.latency_ms:g} ms first-byte latency per object{cap}."
        )

    def reset_counters(self) -> None:
        """Sets the counters to zero, the in-flight peak to now's count; forgets the latencies."""
        with self._lock:
            self.num_requests = 0
            self.num_bytes_read = 0
            self.max_in_flight = self._in_flight
            self.latencies_ms: list[float] = []

    def draw_latency_ms(self) -> float:
        """Draws one first-byte latency from the storage's model.

        Returns:
            Milliseconds: `latency_ms` when fixed, else a draw from the long-tailed model.
        """
        if self.latency_p99_ms is None or self.latency_ms == 0:
            return self.latency_ms
        sigma = np.log(self.latency_p99_ms / self.latency_ms) / _Z_99
        with self._lock:
            return float(self.latency_ms * np.exp(sigma * self._random.standard_normal()))

    def wait_for_object(self, num_bytes: int) -> None:
        """Blocks as long as reading one whole object of `num_bytes` bytes takes; counts it.

        Args:
            num_bytes: the object's size.
        """
        self._open(num_bytes, transfer=True)

    def open_object(self, num_bytes: int) -> int:
        """Blocks until an object's first byte arrives; counts it; returns its stream's id.

        For readers that read an object's records themselves (as Grain reads ArrayRecord
        files): charge the bytes as they are read with `wait_for_bytes(stream, ...)`.

        Args:
            num_bytes: the object's size.

        Returns:
            The stream's id.
        """
        return self._open(num_bytes, transfer=False)

    def _open(self, num_bytes: int, *, transfer: bool) -> int:
        latency_ms = self.draw_latency_ms()
        with self._lock:
            self.num_requests += 1
            self.num_bytes_read += int(num_bytes)
            self.latencies_ms.append(latency_ms)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        try:
            if latency_ms:
                time.sleep(latency_ms / 1000)
        finally:
            with self._lock:
                self._in_flight -= 1
                stream = next(self._stream_ids)
                self._stream_clocks[stream] = time.monotonic()
        if transfer:
            self.wait_for_bytes(stream, num_bytes)
            with self._lock:
                self._stream_clocks.pop(stream, None)
        return stream

    def wait_for_bytes(self, stream: int, num_bytes: int) -> None:
        """Blocks until `num_bytes` more bytes of an open stream have arrived.

        A stream receives its bytes from its first byte on, whether or not they are read
        yet; reading them waits only for those that have not arrived.

        Args:
            stream: the stream's id, from opening it.
            num_bytes: how many more bytes are read.
        """
        if not (self.megabytes_per_second or self.total_megabytes_per_second):
            return
        with self._lock:
            arrived = self._stream_clocks.get(stream, time.monotonic())
            if self.megabytes_per_second:
                arrived += num_bytes / (self.megabytes_per_second * 1e6)
            if self.total_megabytes_per_second:
                start = max(self._network_clock, self._stream_clocks.get(stream, arrived))
                self._network_clock = start + num_bytes / (self.total_megabytes_per_second * 1e6)
                arrived = max(arrived, self._network_clock)
            self._stream_clocks[stream] = arrived
        delay = arrived - time.monotonic()
        if delay > 0:
            time.sleep(delay)


class SimulatedStorage(StorageWaits):
    """Reads files as if each one were an object on cloud storage.

    Every object opened waits for its first byte: exactly `latency_ms` (the fixed model),
    or, with `latency_p99_ms`, a lognormal draw with median `latency_ms` and 99th
    percentile `latency_p99_ms` (the object-storage model: most requests are quick, a few
    are very slow). Then its bytes arrive at most at `megabytes_per_second` per object
    stream and, if set, `total_megabytes_per_second` for all streams together. A TFRecord
    file streams: its first records can be read before its last bytes have arrived.

    A wait holds the thread that asked, as a real blocking read does, and requests on
    different threads overlap, as they do on real object storage. The storage counts
    requests, bytes, the first-byte latencies it drew, and the most requests seen in
    flight at once, so that a pipeline's real parallelism can be measured.

    Args:
        latency_ms: first-byte latency per object (the median, with `latency_p99_ms`), in
            milliseconds (0 for local disk).
        latency_p99_ms: 99th percentile of the first-byte latency; None: every request
            takes exactly `latency_ms` (the course's earlier, fixed model).
        megabytes_per_second: bandwidth cap per object stream; None for no cap.
        total_megabytes_per_second: bandwidth cap of all streams together (the machine's
            network); None for no cap.
        seed: seed of the latency draws.
        simulated: False for real remote storage (a `gs://` source): nothing is added.
        read_bytes: the function that reads a file's bytes once the wait is over, like
            `tf.io.read_file` (the default, taken when the storage is made): the storage's
            read hook. The benchmark's read routing (`tools/course_benchmark/`) reaches the disk
            with it.

    Raises:
        ValueError: if a latency is negative, the p99 is below the median, or a bandwidth
            is not positive.

    Example:
        storage = SimulatedStorage(latency_ms=50, latency_p99_ms=500, megabytes_per_second=85)
        image_bytes = storage.read_file(path)  # Use it where you would use tf.io.read_file.
    """

    def __init__(
        self,
        latency_ms: float = MEDIAN_LATENCY_MS,
        *,
        latency_p99_ms: float | None = None,
        megabytes_per_second: float | None = None,
        total_megabytes_per_second: float | None = None,
        seed: int = 0,
        simulated: bool = True,
        read_bytes: Callable[[tf.Tensor], tf.Tensor] | None = None,
    ):
        super().__init__(
            latency_ms,
            latency_p99_ms=latency_p99_ms,
            megabytes_per_second=megabytes_per_second,
            total_megabytes_per_second=total_megabytes_per_second,
            seed=seed,
            simulated=simulated,
        )
        self.read_bytes = read_bytes or tf.io.read_file

    @classmethod
    def for_source(
        cls, source: ImageSource, *, latency_ms: float = MEDIAN_LATENCY_MS, **kwargs: object
    ) -> SimulatedStorage:
        """Returns the storage for an `ImageSource`: simulated, unless it is really remote.

        Args:
            source: the images the lab reads.
            latency_ms: the simulated first-byte latency (ignored for a real `gs://` source).
            **kwargs: more settings of `SimulatedStorage`.

        Returns:
            A `SimulatedStorage`, `simulated=False` for a remote source.
        """
        return cls(latency_ms, simulated=not source.is_remote, **kwargs)

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
            return self.read_bytes(path)
        waited = tf.numpy_function(self._wait_for_path, [path], tf.int64, stateful=True)
        with tf.control_dependencies([waited]):
            return self.read_bytes(path)

    def tfrecord_dataset(
        self, filenames: Sequence[str] | tf.data.Dataset, *, num_parallel_reads: int | None = None
    ) -> tf.data.Dataset:
        """Reads TFRecord files, like `tf.data.TFRecordDataset`, paying the wait per file opened.

        Each file pays one first-byte wait when it is opened; with a bandwidth cap, its
        records then arrive as a stream, at most at the cap.

        Args:
            filenames: a list of paths or a dataset of path strings.
            num_parallel_reads: files read at once (None: one after another; an integer or
                `tf.data.AUTOTUNE`), as in `tf.data.TFRecordDataset`.

        Returns:
            A dataset of serialized records. Records of files read in parallel interleave;
            their order follows `options.deterministic` (as in `read_tfrecords`).

        Example:
            records = storage.tfrecord_dataset(shard_paths, num_parallel_reads=16)
        """
        if not self.simulated:
            return read_tfrecords(filenames, num_parallel_reads=num_parallel_reads)
        if not isinstance(filenames, tf.data.Dataset):
            filenames = tf.data.Dataset.from_tensor_slices(tf.constant(filenames, tf.string))
        open_file, stream_records = self._open_file, self._stream_records
        if num_parallel_reads is None:
            return filenames.map(open_file).flat_map(stream_records)
        # The files are opened (their first-byte waits) `num_parallel_reads` at a time,
        # ahead of the reads, as tf.data's interleave opens its next inputs ahead of time;
        # the records do not pass through the opening step. (They did, through a
        # `flat_map` per file: 30-40 us of CPU per record in TF 2.21, a tenth of the
        # pipeline's.) Not a parallel map: lab 3's check looks for the learner's own.
        opened = filenames.interleave(
            lambda path: tf.data.Dataset.from_tensors(path).map(open_file),
            cycle_length=num_parallel_reads,
            num_parallel_calls=num_parallel_reads,
        )
        records = opened.interleave(
            stream_records, cycle_length=num_parallel_reads, num_parallel_calls=num_parallel_reads
        )
        # A real read blocks one of the interleave's own threads; the simulated wait runs as
        # a function, which also needs a thread of tf.data's pool. Give the reads a pool of
        # their own, one thread per read, so that the simulation does not limit the reads in
        # flight more than storage would. The pool runs the reads only: the parse and decode
        # steps after them keep tf.data's usual pool, as after a real `TFRecordDataset`.
        # (`options.threading.private_threadpool_size` would hand them the reads' pool too.)
        num_threads = (os.cpu_count() or 1) + max(num_parallel_reads, 1)
        pool = tf.raw_ops.PrivateThreadPoolDataset
        return apply_dataset_op(records, pool, num_threads=num_threads)

    def open_tfrecord(self, path: tf.Tensor) -> tf.data.Dataset:
        """Opens one TFRecord file, like `tf.data.TFRecordDataset(path)`, after its wait.

        The file pays one first-byte wait when its first record is asked for; with a
        bandwidth cap, its records then arrive as a stream, at most at the cap. Give it to
        `interleave()` to read several files at once, each one's wait overlapping the
        others': the wait holds a thread of the file's own, as a blocking read would.

        Args:
            path: a scalar string tensor: the file's path.

        Returns:
            A dataset of the file's serialized records.

        Example:
            records = paths.interleave(storage.open_tfrecord, cycle_length=16,
                                       num_parallel_calls=16, deterministic=False)
        """
        if not self.simulated:
            return tf.data.TFRecordDataset(path)
        opened = tf.data.Dataset.from_tensors(path).map(self._open_file)
        # The records pass through flat_map a batch at a time (per record it would cost
        # more than the parse: see `tfrecord_dataset`), then one by one again.
        batches = opened.flat_map(lambda path, stream: self._stream_records(path, stream, 64))
        # The file's wait runs as a function, which needs a thread of tf.data's pool: give
        # each file one of its own, so that N files' waits overlap on any number of cores.
        pool = tf.raw_ops.PrivateThreadPoolDataset
        return apply_dataset_op(batches.unbatch(), pool, num_threads=1)

    def _open_file(self, path: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        stream = tf.numpy_function(self._open_stream, [path], tf.int64, stateful=True)
        return path, stream

    def _charge(self, batch: tf.Tensor, stream: tf.Tensor) -> tf.Tensor:
        # Each record is framed by 16 bytes in the file (length and checksums).
        num_bytes = tf.reduce_sum(tf.strings.length(batch)) + 16 * tf.size(batch)
        waited = tf.numpy_function(
            self._wait_for_stream, [stream, num_bytes], tf.int64, stateful=True
        )
        with tf.control_dependencies([waited]):
            return tf.identity(batch)

    def _stream_records(
        self, path: tf.Tensor, stream: tf.Tensor, batch_size: int | None = None
    ) -> tf.data.Dataset:
        """A file's records (in batches of `batch_size`, if given), charged as they arrive."""
        records = tf.data.TFRecordDataset(path)
        capped = self.megabytes_per_second or self.total_megabytes_per_second
        if not capped:
            return records.batch(batch_size) if batch_size else records
        # The bytes are charged as the records are read: a file streams.
        charged = records.batch(_RECORDS_PER_CHARGE).map(lambda b: self._charge(b, stream))
        if batch_size == _RECORDS_PER_CHARGE:
            return charged
        charged = charged.unbatch()
        return charged.batch(batch_size) if batch_size else charged

    def _wait_for_path(self, path: bytes) -> np.int64:
        num_bytes = _size_of(path)
        self.wait_for_object(num_bytes)
        return np.int64(num_bytes)

    def _open_stream(self, path: bytes) -> np.int64:
        return np.int64(self._open(_size_of(path), transfer=False))

    def _wait_for_stream(self, stream: np.int64, num_bytes: np.int64) -> np.int64:
        self.wait_for_bytes(int(stream), int(num_bytes))
        return np.int64(num_bytes)


def read_tfrecords(
    filenames: Sequence[str] | tf.data.Dataset, *, num_parallel_reads: int | None = None
) -> tf.data.Dataset:
    """Reads TFRecord files directly, several at once, in the order the options ask.

    Not `tf.data.TFRecordDataset(filenames, num_parallel_reads=16)`: with an integer, it
    builds an interleave marked `deterministic: "true"` (TF's readers.py, `sloppy=False`),
    which keeps the files' order whatever `options.deterministic` says. Here each file is
    one `TFRecordDataset` in an `interleave`, whose order follows `options.deterministic`.

    Args:
        filenames: a list of paths or a dataset of path strings.
        num_parallel_reads: files read at once: None (one after another), an integer, or
            `tf.data.AUTOTUNE`.

    Returns:
        A dataset of serialized records.

    Example:
        records = storage.read_tfrecords(shard_paths, num_parallel_reads=16)
    """
    if num_parallel_reads is None:
        return tf.data.TFRecordDataset(filenames)
    if not isinstance(filenames, tf.data.Dataset):
        filenames = tf.data.Dataset.from_tensor_slices([str(path) for path in filenames])
    return filenames.interleave(
        tf.data.TFRecordDataset,
        cycle_length=num_parallel_reads,
        num_parallel_calls=num_parallel_reads,
    )


def apply_dataset_op(dataset: tf.data.Dataset, op: Callable, **attrs: object) -> tf.data.Dataset:
    """Returns `dataset` under one more tf.data op of `tf.raw_ops` that keeps its elements.

    For the ops with no `Dataset` method, through TensorFlow's public API only. The
    course's two: `PrivateThreadPoolDataset` runs its input, and nothing after it, on a
    pool of `num_threads` (its iterators are its input's; the steps downstream keep their
    own pool), and `SleepDataset` waits `sleep_microseconds` before each element, as
    graph ops do on a tf.data service's workers.

    Args:
        dataset: the input dataset.
        op: the op, e.g. `tf.raw_ops.SleepDataset`.
        **attrs: the op's own attributes, e.g. `sleep_microseconds=50_000`.

    Returns:
        A dataset of the same elements (`tf.data.experimental.from_variant`).

    Example:
        slow = storage.apply_dataset_op(paths, tf.raw_ops.SleepDataset, sleep_microseconds=50_000)
    """
    specs = tf.nest.flatten(dataset.element_spec)
    variant = op(
        input_dataset=tf.data.experimental.to_variant(dataset),
        output_types=[spec.dtype for spec in specs],
        output_shapes=[spec.shape for spec in specs],
        **attrs,
    )
    return tf.data.experimental.from_variant(variant, dataset.element_spec)


def _size_of(path: bytes | np.ndarray) -> int:
    if isinstance(path, np.ndarray):  # Called eagerly, numpy_function gives a 0-d array.
        path = path.item()
    name = path.decode() if isinstance(path, bytes) else str(path)
    return os.path.getsize(name) if "://" not in name else tf.io.gfile.stat(name).length
